"""Where crawl state is kept: one package per storage engine, and the registry that picks one.

``registry``   which class keeps each piece of state (``FRONTIER_BACKEND``, ``BACKEND_CLASSES``)
``memory``     the embedded default: the frontier in this process's memory
``sqlite``     one crawl kept on disk (``JOBDIR``): frontier queues, crawl database, index,
               one file per worker
``redis``      several workers, one crawl: frontier, robots.txt cache, scope, seeds,
               near-duplicates, the fleet's status; every key name in one place
``postgres``   a crawl database and index shared by several workers (``DATABASE_URL``)

The interfaces and the algorithms are the cores' (``crawler.frontier``, ``crawler.crawldb``,
``crawler.index``, ``crawler.robots``, ``crawler.content``); a backend only keeps their state.
"""

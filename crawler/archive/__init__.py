"""WARC output (ISO 28500, WARC 1.1), free of Scrapy: what a fetch becomes in an archive.

``records`` builds the records (request, response, revisit, metadata, warcinfo) from a captured
exchange; ``naming`` names files so that no two workers anywhere ever collide; ``files`` writes
gzip members to a file under an ``.open`` name, rotates it by size and renames it when it is
complete; ``digests`` is the interface of the payload-digest index that turns a repeated payload
into a revisit record; ``archiver`` ties them together; ``thread`` runs it off the reactor;
``cdxj`` indexes a crawl's finished files. The Scrapy side is
``crawler.middlewares.warc`` (capture below decompression), the digest indexes'
storage ``crawler.backends.sqlite.warc_digests`` and ``crawler.backends.redis.warc_digests``.
"""

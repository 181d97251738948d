"""Threads of the crawl's own, free of Scrapy: the one idiom (``jobs.JobThread``: a queue, jobs
run in order on one thread, answers, flush and close) that every piece of work run off the
reactor is built on."""

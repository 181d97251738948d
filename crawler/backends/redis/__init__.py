"""The Redis engine: several ``scrapy crawl`` workers, one polite crawl."""

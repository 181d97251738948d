"""A polite, distributed web crawler built on Scrapy and the Mercator URL frontier."""

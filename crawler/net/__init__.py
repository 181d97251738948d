"""Network facts free of Scrapy: which addresses the crawler may connect to (``addresses``) and
server URLs shown without their password (``credentials``)."""

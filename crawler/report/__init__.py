"""The crawl record's format and the HTML report built from it (``scrapy report``).

Free of Scrapy: the record is written by ``crawler/extensions/recorder.py`` and read here.
"""

"""What a crawl is told: every setting's default (``defaults``) and the schema that reads and
checks the settings' values, from ``-s``, scrapyd and site configs alike (``schema``), a
feature's settings read once into a typed object (``typed``), and which optional parts a crawl
runs (``features``). The bottom layer: free of Scrapy and of every other
package of the crawler."""

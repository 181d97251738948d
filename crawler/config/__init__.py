"""What a crawl is told: every setting's default (``defaults``) and the checks of the settings'
values (``checks``). The bottom layer: free of Scrapy and of every other package of the crawler."""

"""Signals of our own, sent through Scrapy's signal manager."""

# Sent by FrontierDownloader once per fetch, however it ended:
# fetch_finished(request, outcome: crawler.frontier.Outcome value, duration: float | None)
fetch_finished = object()

"""Downloading, the Scrapy side: the HTTP(S) download handler with its limits (``handler``), the
downloader that reports the end of every fetch to the frontier (``downloader``), and the limits'
exceptions and log (``limits``)."""

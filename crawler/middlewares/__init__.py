"""Downloader and spider middlewares: address safety, robots.txt, conditional GET, redirects,
Retry-After, counted decompression, and the lease acknowledgement of a page's output."""

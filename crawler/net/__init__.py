"""Network facts free of Scrapy: which addresses the crawler may connect to (``addresses``),
server URLs shown without their password (``credentials``), and a link as a browser reads it
(``weburl``: WHATWG joining and the URL a request is sent to, used by every layer above that
joins an href: links, ``<base href>``, rel=canonical, requisites, feeds)."""

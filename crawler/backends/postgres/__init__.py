"""The PostgreSQL engine: a crawl database and index shared by several workers
(``DATABASE_URL``)."""

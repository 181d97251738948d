"""The embedded on-disk engine: a crawl kept in SQLite files under ``JOBDIR`` (or a path
setting)."""

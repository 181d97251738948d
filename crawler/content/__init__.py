"""Content analysis shared by the spider and the content pipelines."""

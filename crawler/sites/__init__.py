"""Per-site crawl configs, one TOML file per site.

This folder is a package so the configs travel inside a scrapyd egg as package data.
"""

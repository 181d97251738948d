"""A feature's settings are read once into a typed object, through the one settings schema:
the values a component gets are typed, defaults come from crawler/config/defaults.py, and a
bad value is the same one line as from -s or a site config."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from crawler.archive.config import WarcConfig
from crawler.config import defaults
from crawler.config.schema import SettingsError
from crawler.robots.config import RobotsConfig


def test_defaults_are_the_settings_defaults() -> None:
    config = WarcConfig.from_settings({})
    assert config.enabled is defaults.WARC_ENABLED
    assert config.max_size == defaults.WARC_MAX_SIZE
    assert config.directory_of("docs") == "warc/docs"


def test_text_from_s_is_read_into_the_fields_types() -> None:
    settings = Settings({"WARC_ENABLED": "TRUE", "WARC_MAX_SIZE": "5000", "WARC_DIR": "out"})
    config = WarcConfig.from_settings(settings)
    assert (config.enabled, config.max_size, config.directory) == (True, 5000, "out")


def test_a_bad_value_is_one_line_per_setting_as_from_s() -> None:
    settings = {"WARC_MAX_SIZE": "big", "WARC_CDXJ": "maybe"}
    with pytest.raises(SettingsError) as caught:
        WarcConfig.from_settings(settings)
    assert str(caught.value).splitlines() == [
        "WARC_CDXJ: must be true or false, got 'maybe'",
        "WARC_MAX_SIZE: must be an integer >= 1, got 'big'",
    ]


def test_the_object_is_frozen() -> None:
    config = WarcConfig.from_settings({})
    with pytest.raises(ValueError):
        config.enabled = True  # type: ignore[misc]


def test_robots_settings_are_read_once_into_their_types() -> None:
    config = RobotsConfig.from_settings(
        Settings({"ROBOTSTXT_RETRY_TIMES": "4", "ROBOTSTXT_CACHE_EXPIRY": "3600"})
    )
    assert (config.retry_times, config.cache_expiry) == (4, 3600.0)
    assert config.user_agent is None and config.book_size == defaults.ROBOTSTXT_BOOK_SIZE
    with pytest.raises(SettingsError, match=r"^ROBOTSTXT_RETRY_TIMES: must be an integer >= 0"):
        RobotsConfig.from_settings({"ROBOTSTXT_RETRY_TIMES": "-1"})

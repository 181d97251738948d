"""A feature's settings are read once into a typed object, through the one settings schema:
the values a component gets are typed, defaults come from crawler/config/defaults.py, and a
bad value is the same one line as from -s or a site config."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from crawler.archive.config import WarcConfig
from crawler.config import defaults
from crawler.config.schema import OUR_SETTINGS, SettingsError
from crawler.config.tuning import KNOBS
from crawler.config.typed import FeatureConfig
from crawler.content.config import ContentConfig, NeardupConfig
from crawler.crawldb.config import RecrawlConfig
from crawler.download.dns_config import DnsConfig
from crawler.extensions.heartbeat import HeartbeatConfig
from crawler.extensions.progress import ProgressConfig
from crawler.frontier.config import SharedFrontierConfig
from crawler.index.config import IndexConfig
from crawler.metrics.config import MetricsConfig
from crawler.middlewares.signing import IdentityConfig
from crawler.report.config import RecordConfig
from crawler.robots.config import RobotsConfig
from crawler.sitemaps.config import SitemapsConfig
from crawler.sites.policy import TrapBudgets

FEATURES: list[type[FeatureConfig]] = [
    WarcConfig, RobotsConfig, SitemapsConfig, MetricsConfig, RecordConfig, ContentConfig,
    DnsConfig, RecrawlConfig, SharedFrontierConfig, HeartbeatConfig, NeardupConfig,
    TrapBudgets, ProgressConfig, IndexConfig, IdentityConfig,
]


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
        Settings({"TUNING": '{"robots_retry_times": 4}', "ROBOTSTXT_CACHE_EXPIRY": "3600"})
    )
    assert (config.retry_times, config.cache_expiry) == (4, 3600.0)
    assert config.user_agent is None and config.book_size == 10_000
    with pytest.raises(SettingsError, match=r"^TUNING: robots_retry_times must be an integer >= 0"):
        RobotsConfig.from_settings({"TUNING": {"robots_retry_times": "-1"}})


def test_near_duplicate_settings_are_read_once_into_their_types() -> None:
    """The judge, the detectors and `scrapy neardup` read NEARDUP_* through one object."""
    config = NeardupConfig.from_settings(
        Settings({"NEARDUP_THRESHOLD": "0.7", "TUNING": '{"neardup_link_demotion": 2}'})
    )
    assert (config.enabled, config.threshold, config.link_demotion) == (True, 0.7, 2)
    assert config.index_duplicates is False
    with pytest.raises(SettingsError, match=r"^NEARDUP_THRESHOLD: must be a number <= 1"):
        NeardupConfig.from_settings({"NEARDUP_THRESHOLD": "1.5"})


def test_index_and_identity_settings_are_read_once_into_their_types() -> None:
    """The index pipeline, the SQLite index's path and the summary read INDEX_* through one
    object; the identity middleware reads FROM_ADDRESS and SIGNATURE_* through another, whose
    problems are the schema's, all at once."""
    index = IndexConfig.from_settings(Settings({"INDEX_ENABLED": "false", "INDEX_PATH": "i.db"}))
    assert (index.enabled, index.path) == (False, "i.db")
    with pytest.raises(SettingsError, match=r"^INDEX_ENABLED: must be true or false"):
        IndexConfig.from_settings({"INDEX_ENABLED": "maybe"})
    identity = IdentityConfig.from_settings({"FROM_ADDRESS": "ops@example.org"})
    assert (identity.from_address, identity.key_file) == ("ops@example.org", "")
    with pytest.raises(SettingsError) as info:
        IdentityConfig.from_settings({"SIGNATURE_KEY_FILE": "k.pem", "FROM_ADDRESS": "nobody"})
    assert [p.split(":")[0] for p in info.value.problems] == ["FROM_ADDRESS", "SIGNATURE_KEY_FILE"]


@pytest.mark.parametrize("feature", FEATURES, ids=lambda f: f.__name__)
def test_each_field_is_a_setting_of_ours_with_its_default(feature: type[FeatureConfig]) -> None:
    config = feature.from_settings({})
    for name, field in feature.setting_names().items():
        if name.startswith("TUNING."):  # a knob of the expert setting
            assert getattr(config, field) == KNOBS[name.removeprefix("TUNING.")].default, name
            continue
        assert name in OUR_SETTINGS, name
        assert getattr(config, field) == OUR_SETTINGS[name], name


def test_no_setting_belongs_to_two_features() -> None:
    names = [name for feature in FEATURES for name in feature.setting_names()]
    assert len(names) == len(set(names))


def test_feature_rules_come_from_the_schema() -> None:
    with pytest.raises(SettingsError, match=r"^TUNING: record_interval must be a number > 0"):
        RecordConfig.from_settings({"TUNING": '{"record_interval": 0}'})
    assert RecordConfig.from_settings({"TUNING": {"record_interval": 0.5}}).interval == 0.5
    with pytest.raises(SettingsError, match=r"^METRICS_PORT: must be an integer <= 65535"):
        MetricsConfig.from_settings({"METRICS_PORT": "70000"})
    metrics = MetricsConfig.from_settings(
        {"METRICS_PORT": "9100", "TUNING": {"metrics_interval": 0}}
    )
    assert metrics.enabled and metrics.bind_host == "127.0.0.1"
    assert metrics.snapshot_interval == 0.1
    limits = SitemapsConfig.from_settings({"SITEMAPS_MAX_SITE_URLS": "150"}).limits()
    assert (limits.max_site_urls, limits.max_urls) == (150, 50_000)
    content = ContentConfig.from_settings(Settings({"CONTENT_MARKDOWN": "false"}))
    assert content.markdown is False and content.max_html == defaults.PAGE_MAX_HTML


def test_dns_servers_are_a_list_from_text_or_json() -> None:
    assert DnsConfig.from_settings({"DNS_SERVERS": "10.0.0.1:53,10.0.0.2"}).servers == (
        "10.0.0.1:53", "10.0.0.2",
    )
    assert DnsConfig.from_settings({"DNS_SERVERS": '["[::1]:53"]'}).servers == ("[::1]:53",)
    bounds = DnsConfig.from_settings({"TUNING": {"dns_min_ttl": "30000"}}).ttl_bounds()
    assert (bounds.minimum, bounds.maximum) == (30000.0, 30000.0)  # past 6 h: the minimum wins


def test_the_adaptive_schedule_follows_recrawl_interval() -> None:
    from crawler.crawldb.schedule import AdaptiveSchedule

    schedule = AdaptiveSchedule.from_settings(
        Settings({"RECRAWL_INTERVAL": "0.6", "TUNING": '{"recrawl_sync_delta": false}'})
    )
    assert (schedule.interval, schedule.sync_delta) == (0.6, False)
    # a page may come back ten times as often as the first interval, wait 30 days at most
    assert schedule.min_interval == pytest.approx(0.06) and schedule.max_interval == 30 * 86400
    assert AdaptiveSchedule.from_settings({}).min_interval == 60.0  # a day: a minute at least

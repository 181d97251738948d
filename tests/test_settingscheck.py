"""The crawler's own settings are checked by their own names before a crawl starts, by one
schema that reads a value the same way from -s, scrapyd's setting= and a site config."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.config.schema import (
    OUR_SETTINGS,
    REMOVED,
    SettingsError,
    check_settings,
    read_value,
    unknown_problem,
    value_problem,
)
from crawler.frontier.politeness import PolitenessPolicy, politeness_from_settings
from crawler.metrics.config import MetricsConfig
from crawler.sites import Politeness, Setting, load_all_sites
from crawler.sites.policy import TrapBudgets


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("FRONTIER_MIN_DELAY", "abc", "must be a number >= 0, got 'abc'"),
        ("FRONTIER_MIN_DELAY", "-1", "must be a number >= 0, got -1"),
        ("FRONTIER_HOST_CONCURRENCY", "0", "must be an integer >= 1, got 0"),
        ("FRONTIER_HOST_CONCURRENCY", "1.5", "must be an integer >= 1, got '1.5'"),
        ("FRONTIER_LEASE_TTL", "0", "must be a number > 0, got 0"),
        ("NEARDUP_THRESHOLD", "1.5", "must be a number <= 1, got 1.5"),
        ("NEARDUP_ENABLED", "maybe", "must be true or false, got 'maybe'"),
        ("FRONTIER_PRIORITY_POLICY", "random", "must be one of depth, breadth_first, fifo, "
         "request, opic, got 'random'"),
    ],
)
def test_a_bad_value_is_named_with_what_the_setting_takes(
    name: str, value: str, problem: str
) -> None:
    assert value_problem(name, value) == problem


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FRONTIER_MIN_DELAY", "0.25"),
        ("FRONTIER_MIN_DELAY", 3),
        ("FRONTIER_HOST_CONCURRENCY", "2"),
        ("RECRAWL_INTERVAL", "3600.5"),  # an integer default, but seconds
        ("NEARDUP_ENABLED", "False"),
        ("FRONTIER_RESET", "1"),
        ("FRONTIER_PRIORITY_POLICY", "fifo"),
        ("DOWNLOAD_TIMEOUT", "abc"),  # Scrapy's own: not ours to judge
    ],
)
def test_good_values_and_other_libraries_settings_pass(name: str, value: object) -> None:
    assert value_problem(name, value) is None


def test_a_misspelt_setting_of_ours_is_refused_with_a_did_you_mean() -> None:
    assert unknown_problem("FRONTIER_MIN_DLEAY") == (
        "unknown setting; did you mean FRONTIER_MIN_DELAY?"
    )
    assert value_problem("FRONTIER_MIN_DLEAY", "1") == (
        "unknown setting; did you mean FRONTIER_MIN_DELAY?"
    )
    assert unknown_problem("FRONTIER_MIN_DELAY") is None
    assert unknown_problem("DOWNLOAD_TIMEOUT") is None  # not one of our prefixes
    assert unknown_problem("ROBOTSTXT_OBEY") is None  # Scrapy's
    assert unknown_problem("REDIS_START_URLS_KEY") is None  # scrapy-redis's
    assert unknown_problem("METRICS_PAGES") == (
        "unknown setting (docs/reference/settings.md lists them)"
    )


def test_a_removed_setting_is_refused_saying_what_became_of_it() -> None:
    """A tuning knob made a constant (issue 38) is refused, not ignored: its operator asked for
    something the crawl would not do."""
    values = {"DNS_CONCURRENCY": "10", "RECRAWL_MIN_INTERVAL": "60", "WARC_GZIP_LEVEL": 9}
    problems = check_settings(values, values.get).problems
    assert problems == [
        "DNS_CONCURRENCY: no longer a setting: a constant of crawler/download/dns.py",
        "RECRAWL_MIN_INTERVAL: no longer a setting: it follows RECRAWL_INTERVAL",
        "WARC_GZIP_LEVEL: no longer a setting: a constant of crawler/archive/files.py",
    ]
    assert not set(REMOVED) & set(OUR_SETTINGS)


def test_tuning_knobs_and_near_duplicate_sizes_are_no_settings() -> None:
    """Issue 38's third pass: a knob only tests turn and the near-duplicate detector's sizes are
    refused with where they went, and the knob is read from TUNING by its feature."""
    values = {"NEARDUP_CACHE_BYTES": "1024", "URL_MAX_DATE_PAST_DAYS": "365",
              "METRICS_LINGER": "60"}
    problems = check_settings(values, values.get).problems
    assert sorted(problems) == [
        "METRICS_LINGER: no longer a setting: an expert knob, TUNING's metrics_linger",
        "NEARDUP_CACHE_BYTES: no longer a setting: a constant of "
        "crawler/backends/redis/neardup.py",
        "URL_MAX_DATE_PAST_DAYS: no longer a setting: an expert knob, TUNING's "
        "url_date_past_days",
    ]
    budgets = TrapBudgets.from_settings({"TUNING": {"url_date_past_days": 365}})
    assert (budgets.max_date_past_days, budgets.max_query_variants) == (365, 100)
    assert MetricsConfig.from_settings({"TUNING": '{"metrics_linger": 60}'}).linger == 60.0


@pytest.mark.parametrize(
    ("name", "became"),
    [
        ("FRONTIER_HOST_FAILURE_WINDOW", "an expert knob, TUNING's host_failure_window"),
        ("FRONTIER_HOST_MAX_FAILURE_RATIO", "an expert knob, TUNING's host_failure_ratio"),
        ("FRONTIER_MAX_BACKLOG_BYTES", "an expert knob, TUNING's max_backlog_bytes"),
        ("ROBOTSTXT_RETRY_TIMES", "an expert knob, TUNING's robots_retry_times"),
        ("RETRY_AFTER_MAX", "a constant of crawler/middlewares/retry_after.py (MAX_WAIT, an hour)"),
        ("RETRY_AFTER_TIMES", "a 429 or 503 is asked again RETRY_TIMES times, like any other "
         "answer that says try again"),
        ("WARC_FSYNC", "each WARC file is always fsynced before its rename"),
        ("CRAWL_SUMMARY", "the summary is always logged at the end of a crawl"),
    ],
)
def test_the_fourth_pass_names_are_refused_saying_what_became_of_them(
    name: str, became: str
) -> None:
    """Issue 38's fourth pass (87 settings to 79): each name cut is refused in one line, from
    -s as from a site config, and is no setting any more."""
    assert check_settings([name], {name: "1"}.get).problems == [
        f"{name}: no longer a setting: {became}"
    ]
    assert name not in OUR_SETTINGS


def test_a_cut_setting_in_a_site_config_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        'name = "x"\nseeds = ["https://a.example/"]\n[settings]\nRETRY_AFTER_TIMES = 5\n',
        encoding="utf-8",
    )
    sites, errors = load_all_sites(str(tmp_path))
    assert not sites
    assert [str(e) for e in errors.values()] == [
        f"{tmp_path / 'x.toml'}: settings.RETRY_AFTER_TIMES: no longer a setting: a 429 or 503 "
        "is asked again RETRY_TIMES times, like any other answer that says try again"
    ]


def test_a_removed_setting_in_a_site_config_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        'name = "x"\nseeds = ["https://a.example/"]\n[settings]\nINDEX_BATCH_SIZE = 50\n',
        encoding="utf-8",
    )
    sites, errors = load_all_sites(str(tmp_path))
    assert not sites
    assert [str(e) for e in errors.values()] == [
        f"{tmp_path / 'x.toml'}: settings.INDEX_BATCH_SIZE: "
        "no longer a setting: a constant of crawler/pipelines/index.py"
    ]


def test_an_unknown_setting_in_a_site_config_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        'name = "x"\nseeds = ["https://a.example/"]\n[settings]\nSITEMAPS_PROBES = true\n'
        "DNS_TIMEOUT = 5\n",  # Scrapy's: not ours to judge
        encoding="utf-8",
    )
    sites, errors = load_all_sites(str(tmp_path))
    assert not sites
    assert [str(e) for e in errors.values()] == [
        f"{tmp_path / 'x.toml'}: settings.SITEMAPS_PROBES: "
        "unknown setting; did you mean SITEMAPS_PROBE?"
    ]


def test_check_settings_reports_every_problem_and_where_an_unknown_name_came_from() -> None:
    values = {"FRONTIER_MIN_DELAY": "x", "FRONTIER_MAX_DELAY": "-3", "INDEX_PAHT": 5}
    problems = check_settings(values, values.get, where=lambda name: " (-s)").problems
    assert problems == [
        "FRONTIER_MAX_DELAY: must be a number >= 0, got -3",
        "FRONTIER_MIN_DELAY: must be a number >= 0, got 'x'",
        "INDEX_PAHT (-s): unknown setting; did you mean INDEX_PATH?",
    ]


def test_a_site_config_with_a_bad_setting_value_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        'name = "x"\nseeds = ["https://a.example/"]\n[settings]\nURL_MAX_QUERY_VARIANTS = "many"\n',
        encoding="utf-8",
    )
    sites, errors = load_all_sites(str(tmp_path))
    assert not sites
    assert [str(e) for e in errors.values()] == [
        f"{tmp_path / 'x.toml'}: settings.URL_MAX_QUERY_VARIANTS: "
        'must be an integer >= 0, got "many"'  # shown as TOML writes it, like every key's value
    ]


def test_a_seed_refused_by_its_own_patterns_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        'name = "x"\nseeds = ["https://a.example/", "https://a.example/docs/"]\n'
        "[urls]\nallow = ['/docs/']\n",
        encoding="utf-8",
    )
    _, errors = load_all_sites(str(tmp_path))
    assert [str(e) for e in errors.values()] == [
        f"{tmp_path / 'x.toml'}: seeds[0]: matches none of urls.allow, so it would never be fetched"
    ]


def test_the_packaged_site_configs_load() -> None:
    sites, errors = load_all_sites()
    assert not errors
    assert {"example", "web"} <= set(sites)


# --- One schema: -s and a site config read a value the same way -----------------------------

# A value as a site config writes it (TOML) and as -s or scrapyd's setting= gives it (text).
SAME_VALUES = [
    ("0", "0"), ("2", "2"), ("60", "60"), ("1.5", "1.5"), ("-1", "-1"), ("1e3", "1e3"),
    ('"fast"', "fast"), ('"2"', "2"), ("nan", "nan"), ("inf", "inf"), ("true", "true"),
    ('""', ""),
]  # fmt: skip


def _politeness_keys() -> dict[str, str]:
    """Each key of [politeness] and the setting it stands for, from the site file's schema."""
    return {
        key: mark.name
        for key, info in Politeness.model_fields.items()
        for mark in info.metadata
        if isinstance(mark, Setting)
    }


def test_every_politeness_key_is_a_setting_of_ours() -> None:
    keys = _politeness_keys()
    assert set(keys) == set(Politeness.model_fields)
    assert all(name in OUR_SETTINGS for name in keys.values())


@pytest.mark.parametrize("key", sorted(_politeness_keys()))
@pytest.mark.parametrize(("toml", "text"), SAME_VALUES)
def test_a_value_gets_the_same_verdict_from_s_and_from_a_site_config(
    tmp_path: Path, key: str, toml: str, text: str
) -> None:
    keys = _politeness_keys()
    name = keys[key]
    by_s = check_settings([name], {name: text}.get, given=[name])
    (tmp_path / "x.toml").write_text(f'name = "x"\n[politeness]\n{key} = {toml}\n')
    sites, errors = load_all_sites(str(tmp_path))
    if by_s.problems:
        [error] = errors.values()
        # the same words, each naming a setting or showing a value as its source writes it
        expected = by_s.problems[0].removeprefix(f"{name}: ").replace(repr(text), toml)
        for other_key, other in keys.items():
            expected = expected.replace(other, other_key)
        assert error.problems == ((f"politeness.{key}", expected),)
    else:
        assert not errors, errors
        assert sites["x"].settings[name] == by_s.values[name]
        assert type(sites["x"].settings[name]) is type(by_s.values[name])


def test_the_min_delay_above_the_default_max_is_refused_by_both() -> None:
    """The issue's example: -s FRONTIER_MIN_DELAY=60 used to pass (and stop the crawl later with
    a traceback) while min_delay = 60 in a site config was refused."""
    values = {"FRONTIER_MIN_DELAY": "60"}
    assert check_settings(values, values.get, given=values).problems == [
        "FRONTIER_MIN_DELAY: must not exceed FRONTIER_MAX_DELAY (30, the project default), got 60"
    ]
    values["FRONTIER_MAX_DELAY"] = "60"
    assert check_settings(values, values.get, given=values).problems == []
    only_max = {"FRONTIER_MIN_DELAY": 1.0, "FRONTIER_MAX_DELAY": "0.5"}
    assert check_settings(only_max, only_max.get, given=["FRONTIER_MAX_DELAY"]).problems == [
        "FRONTIER_MAX_DELAY: must not be below FRONTIER_MIN_DELAY (1, the project default),"
        " got 0.5"
    ]
    # a value refused on its own is not also compared with a default
    bad = {"FRONTIER_MIN_DELAY": "60", "FRONTIER_MAX_DELAY": "slow"}
    assert check_settings(bad, bad.get).problems == [
        "FRONTIER_MAX_DELAY: must be a number >= 0, got 'slow'"
    ]


@pytest.mark.parametrize(
    ("text", "networks"),
    [
        ('["127.0.0.2/32:8080", "10.20.0.0/16"]', ("127.0.0.2/32:8080", "10.20.0.0/16")),
        ("127.0.0.2/32:8080,10.20.0.0/16", ("127.0.0.2/32:8080", "10.20.0.0/16")),
        ("127.0.0.2/32:8080, 10.20.0.0/16,", ("127.0.0.2/32:8080", "10.20.0.0/16")),
        ("[::1]:443,10.0.0.0/8", ("[::1]:443", "10.0.0.0/8")),  # starts like JSON, is not
        ('["[::1]:443"]', ("[::1]:443",)),
        ("10.0.0.0/8", ("10.0.0.0/8",)),
        ("", ()),
        ("[]", ()),
        (["10.0.0.0/8"], ("10.0.0.0/8",)),  # a real list, from a settings module
        (("10.0.0.0/8",), ("10.0.0.0/8",)),
    ],
)
def test_a_list_setting_reads_a_json_list_or_a_comma_list(text: object, networks: tuple) -> None:
    assert read_value("ALLOWED_NETWORKS", text) == networks


def test_crawl_purpose_is_one_or_more_known_purposes() -> None:
    assert read_value("CRAWL_PURPOSE", "search") == ("search",)
    assert read_value("CRAWL_PURPOSE", "Archive, ai-train,archive") == ("archive", "ai-train")
    assert read_value("CRAWL_PURPOSE", '["ai-input"]') == ("ai-input",)
    for bad in ("", "training", "search,", [], 1):
        assert value_problem("CRAWL_PURPOSE", bad) == (
            "must be one or more of search, archive, ai-train, ai-input (a list or a,b), "
            f"got {bad!r}"
        )


def test_every_list_setting_of_ours_reads_json_and_commas() -> None:
    lists = [name for name, default in OUR_SETTINGS.items() if isinstance(default, tuple)
             and name != "CRAWL_PURPOSE"]  # a list of given words: test_crawl_purpose_...
    assert "ALLOWED_NETWORKS" in lists
    for name in lists:
        assert read_value(name, '["a", "b"]') == read_value(name, "a,b") == ("a", "b")
        assert read_value(name, ["a", "b"]) == ("a", "b")
        assert value_problem(name, "[1, 2]") == (
            "must be a list of strings (a JSON list or a,b), got '[1, 2]'"
        )
        assert value_problem(name, 3) is not None


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        # what Scrapy's getbool refuses mid-start used to pass here
        ("NEARDUP_ENABLED", "yes", "must be true or false, got 'yes'"),
        ("NEARDUP_ENABLED", "", "must be true or false, got ''"),
        ("FRONTIER_MIN_DELAY", "nan", "must be a number >= 0, got 'nan'"),
        ("FRONTIER_MIN_DELAY", float("inf"), "must be a number >= 0, got inf"),
        ("FRONTIER_HOST_CONCURRENCY", 1.5, "must be an integer >= 1, got 1.5"),  # not cut to 1
        ("URL_MAX_LENGTH", "0", "must be an integer >= 1, got 0"),
        ("FRONTIER_IP_DELAY", "soon", "must be a number >= 0, got 'soon'"),  # was any text
        ("FRONTIER_MIN_DELAY", True, "must be a number >= 0, got True"),
    ],
)
def test_values_that_used_to_pass_and_fail_later_are_refused(
    name: str, value: object, problem: str
) -> None:
    assert value_problem(name, value) == problem


def test_values_are_read_into_the_settings_type() -> None:
    assert read_value("FRONTIER_MIN_DELAY", "2") == 2.0
    assert read_value("FRONTIER_HOST_CONCURRENCY", " 2 ") == 2
    assert read_value("FRONTIER_HOST_CONCURRENCY", 2.0) == 2
    assert read_value("NEARDUP_ENABLED", "TRUE") is True
    assert read_value("NEARDUP_ENABLED", 0) is False
    assert read_value("FRONTIER_PRIORITY_POLICY", "FIFO") == "fifo"
    assert read_value("FRONTIER_PRIORITY_POLICY", "breadth_first") == "depth"  # its alias
    assert read_value("FRONTIER_BACKEND", "Redis") == "redis"
    assert read_value("STATS_FILE", "x.json") == "x.json"
    assert read_value("FRONTIER_IP_DELAY", "") is None  # not set: FRONTIER_MIN_DELAY
    assert read_value("FRONTIER_IP_DELAY", "0.5") == 0.5
    assert read_value("DOWNLOAD_TIMEOUT", "abc") == "abc"  # not ours
    assert read_value("TUNING", '{"idle_horizon": "2"}') == {"idle_horizon": 2.0}
    assert read_value("TUNING", {"read_ahead": 3}) == {"read_ahead": 3}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"idle_horizn": 2}', "unknown knob 'idle_horizn'; did you mean idle_horizon?"),
        ({"read_ahead": 0}, "read_ahead must be an integer >= 1, got 0"),
        ({"host_failure_window": 33}, "host_failure_window must be an integer <= 32, got 33"),
        ({"host_failure_ratio": 0}, "host_failure_ratio must be a number > 0, got 0"),
        ({"host_failure_ratio": 1.5}, "host_failure_ratio must be a number <= 1, got 1.5"),
        ("idle_horizon=2", "must be a table of knobs such as {\"idle_horizon\": 2}, got "
         "'idle_horizon=2'"),
    ],
)
def test_tuning_refuses_unknown_knobs_and_bad_values(value: object, problem: str) -> None:
    assert value_problem("TUNING", value) == problem


def test_the_politeness_policy_is_built_from_the_checked_values() -> None:
    policy = politeness_from_settings(
        {"FRONTIER_MIN_DELAY": "2", "FRONTIER_HOST_CONCURRENCY": "3", "FRONTIER_MAX_DELAY": None}
    )
    assert policy == PolitenessPolicy(min_delay=2.0, host_concurrency=3)
    assert politeness_from_settings({}) == PolitenessPolicy()
    with pytest.raises(SettingsError) as info:
        politeness_from_settings(
            {"FRONTIER_MIN_DELAY": "60", "TUNING": {"host_failure_window": 40}, "INDEX_PATH": "x"}
        )
    assert info.value.problems == (
        "FRONTIER_MIN_DELAY: must not exceed FRONTIER_MAX_DELAY (30, the project default),"
        " got 60",
        "TUNING: host_failure_window must be an integer <= 32, got 40",
    )
    tuned = politeness_from_settings({"TUNING": {"host_failure_window": 10,
                                                 "host_failure_ratio": 0.3}})
    assert (tuned.failure_window, tuned.max_failure_ratio, tuned.window_failures) == (10, 0.3, 3)

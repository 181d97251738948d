"""The crawler's own settings are checked by their own names before a crawl starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.config.checks import check_settings, unknown_setting_hint, value_problem
from crawler.sites.config import load_all_sites


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
         "request, got 'random'"),
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


def test_a_misspelt_setting_of_ours_gets_a_did_you_mean() -> None:
    assert unknown_setting_hint("FRONTIER_MIN_DLEAY") == (
        "unknown setting FRONTIER_MIN_DLEAY, ignored; did you mean FRONTIER_MIN_DELAY?"
    )
    assert unknown_setting_hint("FRONTIER_MIN_DELAY") is None
    assert unknown_setting_hint("DOWNLOAD_TIMEOUT") is None  # not one of our prefixes
    assert unknown_setting_hint("ROBOTSTXT_OBEY", known={"ROBOTSTXT_OBEY"}) is None


def test_check_settings_reports_every_problem_and_warning() -> None:
    values = {"FRONTIER_MIN_DELAY": "x", "FRONTIER_MAX_DELAY": "-3", "INDEX_BACTH_SIZE": 5}
    problems, warnings = check_settings(values, values.get)
    assert problems == [
        "FRONTIER_MAX_DELAY: must be a number >= 0, got -3",
        "FRONTIER_MIN_DELAY: must be a number >= 0, got 'x'",
    ]
    assert warnings == ["unknown setting INDEX_BACTH_SIZE, ignored; did you mean INDEX_BATCH_SIZE?"]


def test_a_site_config_with_a_bad_setting_value_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        'name = "x"\nseeds = ["https://a.example/"]\n[settings]\nROBOTSTXT_RETRY_TIMES = "many"\n',
        encoding="utf-8",
    )
    sites, errors = load_all_sites(str(tmp_path))
    assert not sites
    assert [str(e) for e in errors.values()] == [
        f"{tmp_path / 'x.toml'}: settings.ROBOTSTXT_RETRY_TIMES: "
        "must be an integer >= 0, got 'many'"
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

"""Site configs: what loads, and that every refusal names the file, the key and the problem."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from crawler.frontier.urls import InvalidUrl, normalize_url
from crawler.sites import (
    Scope,
    SeedsFileError,
    SiteConfig,
    SiteConfigError,
    load_all_sites,
    load_site_config,
    read_seeds_file,
    schema_tables,
    seed_url_problem,
)

FULL = """
name = "shop"
seeds = ["https://shop.example/", "http://127.0.0.1:8080/x"]
seeds_file = "lists/shop-seeds.txt"
user_agent = "test-bot/1.0"
allow_private_addresses = true

[scope]
hosts = ["Shop.Example", "127.0.0.1", "[::1]"]
domains = [".cdn.example", "bücher.example"]

[urls]
allow = ['^https?://(shop\\.example|127\\.0\\.0\\.1:8080)/']
deny = ['\\?sort=', '/cart/']
max_depth = 0
max_url_length = 512
max_repeated_segments = 2

[limits]
max_pages_per_host = 10

[politeness]
min_delay = 0
delay_factor = 2
max_delay = 5.5
host_concurrency = 2
max_crawl_delay = 60

[priority]
policy = "breadth_first"

[settings]
DOWNLOAD_TIMEOUT = 7
ITEM_PIPELINES = {}
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_full_config_loads(tmp_path: Path) -> None:
    write(tmp_path, "lists/shop-seeds.txt", "https://shop.example/a\n")
    site = load_site_config(write(tmp_path, "shop.toml", FULL))
    assert site.name == "shop"
    assert site.path.endswith("shop.toml")
    assert site.seeds == ("https://shop.example/", "http://127.0.0.1:8080/x")
    assert site.seeds_file == str(tmp_path / "lists" / "shop-seeds.txt")
    assert site.scope == Scope(
        hosts=("shop.example", "127.0.0.1", "::1"),
        domains=("cdn.example", "xn--bcher-kva.example"),
    )
    assert site.allow == ("^https?://(shop\\.example|127\\.0\\.0\\.1:8080)/",)
    assert site.deny == ("\\?sort=", "/cart/")
    assert (site.max_depth, site.max_url_length, site.max_repeated_segments) == (0, 512, 2)
    assert site.max_pages_per_host == 10
    assert site.priority_policy == "depth"  # breadth_first is its alias
    assert site.user_agent == "test-bot/1.0"
    assert site.allow_private_addresses is True
    assert dict(site.settings) == {
        "USER_AGENT": "test-bot/1.0",
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.0,
        "FRONTIER_DELAY_FACTOR": 2.0,
        "FRONTIER_MAX_DELAY": 5.5,
        "FRONTIER_HOST_CONCURRENCY": 2,
        "FRONTIER_MAX_CRAWL_DELAY": 60.0,
        "FRONTIER_PRIORITY_POLICY": "depth",
        "DOWNLOAD_TIMEOUT": 7,
        "ITEM_PIPELINES": {},
    }
    with pytest.raises(TypeError):
        site.settings["X"] = 1  # type: ignore[index]
    hash(site)  # frozen and hashable (the scheduler may key caches by it)


def test_minimal_config_defaults(tmp_path: Path) -> None:
    site = load_site_config(str(write(tmp_path, "a-b_1.toml", 'name = "a-b_1"\n')))
    assert site == SiteConfig(
        name="a-b_1", path=site.path, settings={"FRONTIER_PRIORITY_POLICY": "depth"}
    )
    assert site.scope.is_empty
    assert site.seeds_file is None and site.max_depth is None


def test_scope_contains() -> None:
    scope = Scope(hosts=("a.example",), domains=("b.example",))
    assert scope.contains("a.example") and scope.contains("b.example")
    assert scope.contains("x.y.b.example") and scope.contains("b.example.")
    assert not scope.contains("x.a.example") and not scope.contains("notb.example")
    assert not Scope().contains("a.example")
    assert Scope(open=True).contains("any.where.example") and not Scope(open=True).is_empty


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        (
            'name = "bad"\n[politeness]\nmin_delay = "fast"\n',
            "politeness.min_delay",
            'must be a number >= 0, got "fast"',
        ),
        ('name = "bad"\n[politeness]\nmin_delay = -1\n', "politeness.min_delay", "got -1"),
        (
            'name = "bad"\n[scope]\nopen = true\ndomains = ["a.example"]\n',
            "scope",
            "open = true admits every host",
        ),
        ('name = "bad"\n[politeness]\nmax_delay = nan\n', "politeness.max_delay", "number"),
        (
            'name = "bad"\n[politeness]\nhost_concurrency = 0\n',
            "politeness.host_concurrency",
            "integer >= 1",
        ),
        (
            'name = "bad"\n[politeness]\nhost_concurrency = 1.5\n',
            "politeness.host_concurrency",
            "integer >= 1",
        ),
        (
            'name = "bad"\n[politeness]\nmin_delay = 10\nmax_delay = 5\n',
            "politeness.min_delay",
            "must not exceed max_delay",
        ),
        (
            'name = "bad"\n[politeness]\nmin_delay = 600\n',
            "politeness.min_delay",
            "project default",
        ),
        ('name = "bad"\nseeds = "https://a.example/"\n', "seeds", "list of strings"),
        ('name = "bad"\nseeds = ["https://a.example/", 3]\n', "seeds[1]", "non-empty string"),
        ('name = "bad"\nseeds = ["ftp://a.example/"]\n', "seeds[0]", "http:// or https://"),
        ('name = "bad"\nseeds = ["http://[::1"]\n', "seeds[0]", "cannot be parsed"),
        ('name = "bad"\nseeds = ["https://:8080/path"]\n', "seeds[0]", "has no host"),
        ('name = "bad"\nseeds = ["http://a.example:99999/"]\n', "seeds[0]", "cannot be parsed"),
        ('name = "bad"\nseeds = ["example.com"]\n', "seeds[0]", "http:// or https://"),
        (
            'name = "bad"\n[urls]\nallow = ["(unclosed"]\n',
            "urls.allow[0]",
            "invalid regular expression",
        ),
        (
            'name = "bad"\n[urls]\ndeny = ["ok", "[z-a]"]\n',
            "urls.deny[1]",
            "invalid regular expression",
        ),
        ('name = "bad"\n[urls]\nmax_depth = -1\n', "urls.max_depth", "integer >= 0"),
        ('name = "bad"\n[urls]\nmax_depth = true\n', "urls.max_depth", "integer >= 0, got true"),
        (
            'name = "bad"\n[limits]\nmax_pages_per_host = 0\n',
            "limits.max_pages_per_host",
            "integer >= 1",
        ),
        (
            'name = "bad"\n[priority]\npolicy = "random"\n',
            "priority.policy",
            'must be one of depth, breadth_first, fifo, request, opic, got "random"',
        ),
        ('name = "other"\n', "name", 'must equal the file name without .toml ("bad")'),
        ('name = "Bad"\n', "name", "must match"),
        ("seeds = []\n", "name", "is required"),
        (
            'name = "bad"\nseed = ["https://a.example/"]\n',
            "seed",
            "unknown key (did you mean seeds?)",
        ),
        (
            'name = "bad"\n[politeness]\nmin_dealy = 1\n',
            "politeness.min_dealy",
            "did you mean min_delay?",
        ),
        (
            'name = "bad"\n[scope]\nhosts = []\nuser_agent = "x"\n',
            "scope.user_agent",
            "before the first [table]",
        ),
        ('name = "bad"\nmax_depth = 3\n', "max_depth", "did you mean urls.max_depth"),
        ('name = "bad"\n[crawl]\nx = 1\n', "crawl", "unknown key"),
        ('name = "bad"\nscope = ["a.example"]\n', "scope", "must be a table"),
        (
            'name = "bad"\n[scope]\nhosts = ["https://a.example/"]\n',
            "scope.hosts[0]",
            "bare host name",
        ),
        ('name = "bad"\n[scope]\nhosts = ["a.example:8080"]\n', "scope.hosts[0]", "bare host name"),
        ('name = "bad"\n[scope]\ndomains = ["10.0.0.1"]\n', "scope.domains[0]", "not an IP"),
        (
            'name = "bad"\n[scope]\ndomains = ["a b.example"]\n',
            "scope.domains[0]",
            "not a valid host name",
        ),
        (
            'name = "bad"\nallow_private_addresses = "yes"\n',
            "allow_private_addresses",
            'must be true or false, got "yes"',
        ),
        ('name = "bad"\nuser_agent = "a\\nX-Evil: 1"\n', "user_agent", "control characters"),
        ('name = "bad"\nseeds_file = "missing.txt"\n', "seeds_file", "no such file"),
        (
            'name = "bad"\n[settings]\ndownload_timeout = 5\n',
            "settings.download_timeout",
            "UPPER_CASE",
        ),
        (
            'name = "bad"\n[settings]\nUSER_AGENT = "x"\n',
            "settings.USER_AGENT",
            "set it with user_agent instead",
        ),
        (
            'name = "bad"\n[settings]\nFRONTIER_MIN_DELAY = 2\n',
            "settings.FRONTIER_MIN_DELAY",
            "politeness.min_delay",
        ),
    ],
)
def test_invalid_config_names_file_and_key(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(SiteConfigError) as info:
        load_site_config(path)
    exc = info.value
    assert exc.key == key
    assert problem in exc.problem
    assert str(exc).startswith(f"{path}: {key}: ")  # tmp_path is not below the CWD: absolute


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", 'name = "bad"\n[urls\n')
    with pytest.raises(SiteConfigError, match=r"bad\.toml: invalid TOML: .*line 2"):
        load_site_config(path)


def test_error_message_is_relative_below_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write(tmp_path, "sites/example.toml", 'name = "example"\n[politeness]\nmin_delay = "fast"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SiteConfigError) as info:
        load_site_config(tmp_path / "sites" / "example.toml")
    assert str(info.value) == (
        'sites/example.toml: politeness.min_delay: must be a number >= 0, got "fast"'
    )


def test_error_pickles() -> None:
    exc = SiteConfigError("f.toml", "urls.max_depth", "bad")
    again = pickle.loads(pickle.dumps(exc))
    assert (again.file, again.key, again.problem, str(again)) == (
        "f.toml",
        "urls.max_depth",
        "bad",
        "f.toml: urls.max_depth: bad",
    )


def test_shipped_configs_load() -> None:
    sites, errors = load_all_sites()
    assert errors == {}
    assert {"web", "openweb", "example"} <= set(sites)
    web = sites["web"]
    assert web.seeds == () and web.seeds_file is None and web.scope.is_empty
    openweb = sites["openweb"]
    assert openweb.seeds == () and openweb.scope.open and openweb.max_depth == 20
    example = sites["example"]
    assert example.seeds and example.allow and example.deny and not example.scope.is_empty
    assert example.max_depth is not None and example.max_pages_per_host is not None
    assert example.user_agent and "DOWNLOAD_TIMEOUT" in example.settings
    assert example.path == str(Path("crawler/sites/example.toml")) or example.path.endswith(
        "crawler/sites/example.toml"
    )


def test_shipped_example_documents_every_key() -> None:
    """example.toml is the user documentation: every key of the schema is set (or shown
    commented out) in its own table there."""
    text = (Path(__file__).parent.parent / "crawler" / "sites" / "example.toml").read_text()
    # The text of each table, "" being the top level before the first header.
    parts = re.split(r"(?m)^\[([a-z_]+)\]\s*$", text)
    sections = {"": parts[0], **dict(zip(parts[1::2], parts[2::2], strict=True))}
    tables = schema_tables()
    assert "min_delay" in tables["politeness"] and "settings" in tables[""]  # the real schema
    for table, keys in tables.items():
        assert table in sections, f"[{table}]"
        for key in keys:
            if key not in tables:  # a table is checked by its header
                assert re.search(rf"(?m)^#? ?{key} = ", sections[table]), f"{table}.{key}"


def test_every_error_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.toml",
        'name = "bad"\nseed = ["https://a.example/"]\nseeds = ["ftp://a.example/", 3]\n'
        '[scope]\nhosts = ["a.example"]\nuser_agent = "x"\n'
        '[politeness]\nmin_dealy = 1\nmax_delay = "slow"\n'
        "[urls]\nmax_pages_per_host = 5\n",
    )
    with pytest.raises(SiteConfigError) as info:
        load_site_config(path)
    exc = info.value
    problems = dict(exc.problems)
    assert problems == {
        "seed": "unknown key (did you mean seeds?)",
        "seeds[0]": 'must be an http:// or https:// URL, got "ftp://a.example/"',
        "seeds[1]": "must be a non-empty string, got 3",
        "scope.user_agent": (
            "unknown key (top-level keys such as user_agent must come before the first [table]"
            " header)"
        ),
        "politeness.min_dealy": "unknown key (did you mean min_delay?)",
        "politeness.max_delay": 'must be a number >= 0, got "slow"',
        "urls.max_pages_per_host": (
            "unknown key (did you mean limits.max_pages_per_host, in the [limits] table?)"
        ),
    }
    assert len(exc.problems) == len(problems)  # each once
    assert (exc.key, exc.problem) == exc.problems[0]
    assert str(exc).splitlines() == [f"{path}: {key}: {problem}" for key, problem in exc.problems]
    again = pickle.loads(pickle.dumps(exc))
    assert (again.problems, str(again)) == (exc.problems, str(exc))


def test_unknown_key_without_a_close_match_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", 'name = "bad"\n[limits]\nzzz = 1\n')
    with pytest.raises(SiteConfigError) as info:
        load_site_config(path)
    assert info.value.problem == "unknown key (known keys: max_pages_per_host)"


def test_settings_that_a_key_sets_are_refused_in_settings(tmp_path: Path) -> None:
    """Each key marked with a Scrapy setting owns it: [settings] may not set it a second way."""
    reserved = {"USER_AGENT": "user_agent", "DEPTH_LIMIT": "urls.max_depth"}
    reserved |= {f"FRONTIER_{k.upper()}": f"politeness.{k}" for k in ("min_delay", "max_delay")}
    for setting, key in reserved.items():
        path = write(tmp_path, "bad.toml", f'name = "bad"\n[settings]\n{setting} = 1\n')
        with pytest.raises(SiteConfigError) as info:
            load_site_config(path)
        assert (info.value.key, info.value.problem) == (
            f"settings.{setting}",
            f"set it with {key} instead",
        )


def test_seed_check_is_the_frontiers(tmp_path: Path) -> None:
    """A seed is refused exactly when the frontier's normalize_url would refuse it."""
    urls = [
        "https://a.example/x y",
        "HTTP://A.example",
        "http://user@a.example/",
        "http://a%41.example/",
        "https://a b/",
        "http://[::1]:8080/",
        "http://a.example:99999/",
        "javascript:void(0)",
    ]
    for url in urls:
        try:
            normalize_url(url)
        except InvalidUrl:
            assert seed_url_problem(url), url
        else:
            assert seed_url_problem(url) is None, url


def test_load_all_sites_reports_broken_file_without_hiding_good_ones(tmp_path: Path) -> None:
    write(tmp_path, "good.toml", 'name = "good"\nseeds = ["https://good.example/"]\n')
    bad = write(tmp_path, "broken.toml", 'name = "broken"\n[urls]\nmax_depth = "deep"\n')
    write(tmp_path, "notes.txt", "not a config")
    write(tmp_path, ".#good.toml", "editor lock file")
    sites, errors = load_all_sites(tmp_path)
    assert list(sites) == ["good"]
    assert list(errors) == [str(bad)]
    assert errors[str(bad)].key == "urls.max_depth"


def test_load_all_sites_missing_directory(tmp_path: Path) -> None:
    sites, errors = load_all_sites(tmp_path / "nope")
    assert sites == {}
    [exc] = errors.values()
    assert "cannot list site configs" in str(exc) and "nope" in str(exc)


def test_seed_url_problem() -> None:
    assert seed_url_problem("https://a.example/x?y#z") is None
    assert seed_url_problem("http://127.0.0.1:8080/") is None
    for bad in (
        "",
        "not a url",
        "ftp://x/",
        "http://[::1",
        "http://",
        "http://:8080/x",
        "https://a b/",
        "http://a<b/",
        5,
    ):
        assert seed_url_problem(bad), bad


def test_read_seeds_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "seeds.txt",
        "\ufeff# a comment\nhttps://a.example/\n\n   \n  https://b.example/#frag  \n"
        "https://c.example/ # trailing comment\nnot a url\n",
    )
    assert read_seeds_file(path) == [
        "https://a.example/",
        "https://b.example/#frag",
        "https://c.example/",
        "not a url",  # validated (and reported) by the spider, not here
    ]


def test_read_seeds_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SeedsFileError, match=r"nope\.txt: cannot read seeds file: No such file"):
        read_seeds_file(tmp_path / "nope.txt")
    with pytest.raises(SeedsFileError, match="is a directory"):
        read_seeds_file(tmp_path)
    binary = tmp_path / "seeds.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SeedsFileError, match=r"seeds\.bin: seeds file is not UTF-8"):
        read_seeds_file(binary)
    assert issubclass(SeedsFileError, SiteConfigError)


def test_sites_load_from_a_zipped_egg(tmp_path: Path) -> None:
    """In a scrapyd egg the configs (and a seeds_file beside them) are inside a zip."""
    egg = tmp_path / "project.egg"
    with zipfile.ZipFile(egg, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("pkg/sites/__init__.py", "")
        zf.writestr(
            "pkg/sites/zipped.toml",
            'name = "zipped"\nseeds_file = "zipped-seeds.txt"\n[politeness]\nmin_delay = 2\n',
        )
        zf.writestr("pkg/sites/zipped-seeds.txt", "https://z.example/\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from importlib.resources import files\n"
        "from crawler.sites import load_all_sites, read_seeds_file\n"
        "sites, errors = load_all_sites(files('pkg.sites'))\n"
        "assert not errors, errors\n"
        "print(read_seeds_file(sites['zipped'].seeds_file))\n"
    )
    root = Path(__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code, str(egg)],
        cwd=root, capture_output=True, text=True, timeout=30, check=True,
    )
    assert out.stdout.strip() == "['https://z.example/']"


def test_siteconfig_does_not_import_scrapy() -> None:
    code = "import sys, crawler.sites; print('scrapy' in sys.modules)"
    root = Path(__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=30
    )
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize(
    "value",
    [
        '["127.0.0.2/32:8080", "10.20.0.0/16"]',  # a TOML list
        '"127.0.0.2/32:8080,10.20.0.0/16"',  # the text -s takes, both ways
        """'["127.0.0.2/32:8080", "10.20.0.0/16"]'""",
    ],
)
def test_a_list_setting_in_settings_is_read_as_with_s(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, "x.toml", f'name = "x"\n[settings]\nALLOWED_NETWORKS = {value}\n')
    assert load_site_config(path).settings["ALLOWED_NETWORKS"] == (
        "127.0.0.2/32:8080",
        "10.20.0.0/16",
    )


def test_every_bad_value_in_settings_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.toml",
        'name = "x"\nseed = []\n[settings]\nALLOWED_NETWORKS = [8080]\nNEARDUP_ENABLED = "yes"\n'
        'FRONTIER_LEASE_TTL = "600"\nDOWNLOAD_TIMEOUT = "any"\n',
    )
    with pytest.raises(SiteConfigError) as info:
        load_site_config(path)
    assert dict(info.value.problems) == {
        "seed": "unknown key (did you mean seeds?)",
        "settings.ALLOWED_NETWORKS": (
            "must be a list of strings (a JSON list or a,b), got [8080]"
        ),
        "settings.NEARDUP_ENABLED": 'must be true or false, got "yes"',
    }  # FRONTIER_LEASE_TTL = "600" is read as -s reads it; DOWNLOAD_TIMEOUT is Scrapy's


def test_keys_that_are_our_settings_are_read_as_with_s(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.toml",
        'name = "x"\nallow_private_addresses = "true"\n[urls]\nmax_url_length = 1e3\n'
        '[politeness]\nhost_concurrency = "2"\n[priority]\npolicy = "FIFO"\n',
    )
    site = load_site_config(path)
    assert (site.allow_private_addresses, site.max_url_length) == (True, 1000)
    assert site.priority_policy == "fifo"
    assert site.settings["FRONTIER_HOST_CONCURRENCY"] == 2
    path = write(tmp_path, "x.toml", 'name = "x"\n[urls]\nmax_url_length = 0\n')
    with pytest.raises(SiteConfigError, match="max_url_length: must be an integer >= 1, got 0"):
        load_site_config(path)

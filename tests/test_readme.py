"""The README's and the docs' commands run as written.

Every command in a ``sh`` block of README.md and of the docs pages (``DOC_PAGES``) is listed
below: run here, or skipped for a stated reason (it needs the internet, it is this test suite,
it never ends, or another test runs it). A command added without an entry here fails
``test_every_readme_command_is_listed``; a docs page with commands that is not in
``DOC_PAGES`` fails ``test_every_docs_page_with_commands_is_read``.

They run in order (the README, then the pages of ``DOC_PAGES``), each command once, in a fresh
working folder standing in for the user's (the checkout
must not gain files), with these changes only, each for a machine with nothing but loopback:
``.venv/bin/X`` is this test run's Python environment; ``seeds.txt`` holds the seeds of a test
site on 127.0.0.x, so every ``scrapy crawl`` gets ``-s ALLOW_PRIVATE_ADDRESSES=True``; Redis
listens on a free port instead of 6379; ``~`` is the working folder.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from devsite import HostSpec, SiteServer, build_site
from tests.crawling import PROJECT
from tests.redis_support import free_port

README = PROJECT / "README.md"
DOCS = PROJECT / "docs"
# The docs pages whose commands run, in the order they run: a page's commands may need an
# earlier one's (Redis started on the fleet page, the JOBDIR crawl that the report reads).
DOC_PAGES = (
    "index.md",
    "getting-started.md",
    "topics/politeness.md",
    "topics/quality-order.md",
    "topics/near-duplicates.md",
    "topics/big-pages.md",
    "topics/urls.md",
    "topics/items.md",
    "topics/fleet.md",
    "topics/backends.md",
    "topics/recrawl.md",
    "topics/sitemaps.md",
    "topics/archiving.md",
    "operations/faults.md",
    "operations/controls.md",
    "operations/metrics.md",
    "operations/report.md",
    "operations/scrapyd.md",
)
# The benchmarks' history keeps each session's commands as they were run then.
HISTORY = ("benchmarks/history.md",)

INTERNET = "needs the internet"
SCRAPYD = "scrapyd: deployed, scheduled, listed and cancelled by tests/test_scrapyd.py"
# The README's commands, in order, with what this test does with each.
CLUSTER = (
    "skip: a cluster on other machines; tests/test_cluster_crawl.py runs these on a local one"
)
COMMANDS: dict[str, str] = {
    ".venv/bin/mkdocs build --strict -d site": "skip: tests/test_docs.py builds the site",
    ".venv/bin/pip install -r requirements-dev.txt && .venv/bin/mkdocs build --strict -d site": (
        "skip: tests/test_docs.py builds the site"
    ),
    ".venv/bin/pip install -r requirements-dev.txt && .venv/bin/python -m pytest -q": (
        "skip: it is this test suite"
    ),
    "python3 -m venv ~/crawler-env && ~/crawler-env/bin/pip install .": (
        "skip: tests/test_install.py installs the package in a clean venv"
    ),
    "mkdir -p ~/crawls && cd ~/crawls && ~/crawler-env/bin/crawler crawl web "
    "-a seeds=https://example.org/": (
        f"skip: {INTERNET} (example.org); tests/test_install.py crawls a test site with the "
        "installed command from an empty folder"
    ),
    ".venv/bin/python -m devsite --hosts 3 --pages 20 --seeds-file seeds.txt &": (
        "skip: serves until stopped; this test serves a devsite in-process and writes seeds.txt"
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s ALLOW_PRIVATE_ADDRESSES=True": "run",
    ".venv/bin/scrapy list": "run",
    ".venv/bin/scrapy crawl example -o pages.jsonl": f"skip: {INTERNET} (example.com)",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt": "run",
    ".venv/bin/scrapy crawl openweb -a seeds=seeds.txt": "run",
    ".venv/bin/scrapy crawl headings -o headings.jsonl": (
        f"skip: {INTERNET} (docs.python.org); its spider runs in test_the_readme_spider..."
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_MIN_DELAY=3 "
    "-s FRONTIER_HOST_CONCURRENCY=2": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_IP_CONCURRENCY=2 "
    "-s DNS_SERVERS=127.0.0.53": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s JOBDIR=crawls/web-1": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_PRIORITY_POLICY=opic": "run",
    "redis-server --port 6379 --maxmemory-policy noeviction &": "start redis",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_BACKEND=redis -s FRONTIER_SHARDS=3 "
    "-s REDIS_URL=redis://127.0.0.1:6379/0": (
        "skip: before the README starts its Redis; tests/test_policy_counts.py crawls the web "
        "site with OPIC on Redis, tests/test_frontier_partitioned.py runs OPIC's contract"
    ),
    ".venv/bin/scrapy frontier web status -s FRONTIER_BACKEND=redis -s FRONTIER_SHARDS=3 "
    "-s REDIS_URL=redis://127.0.0.1:6379/0": (
        "skip: before the README starts its Redis; tests/test_policy_counts.py reads the status"
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy crawl web -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    "redis-cli rpush web:start_urls https://example.org/": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=rediss://redis.internal:6380/0 -s REDIS_PASSWORD_FILE=/etc/crawl/redis.pass "
    """-s 'REDIS_PARAMS={"ssl_ca_certs": "/etc/crawl/ca.crt", "ssl_certfile": """
    """"/etc/crawl/worker.crt", "ssl_keyfile": "/etc/crawl/worker.key"}'""": (
        "skip: an operator's TLS Redis and certificates; tests/test_redis_tls.py crawls over "
        "rediss:// with a CA of its own"
    ),
    ".venv/bin/scrapy frontier web"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web --json"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web block spam.example.org"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web block --domain example.net"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web unblock spam.example.org"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web pause"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web resume"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web deadline +2h"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    ".venv/bin/scrapy frontier web budget 20GB"
    " -s FRONTIER_BACKEND=redis -s REDIS_URL=redis://127.0.0.1:6379/0": "run",
    "redis-cli --cluster create 10.0.0.1:7000 10.0.0.2:7000 10.0.0.3:7000 10.0.0.1:7001 "
    "10.0.0.2:7001 10.0.0.3:7001 --cluster-replicas 1": CLUSTER,
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=redis://10.0.0.1:7000/0 -s FRONTIER_SHARDS=6": CLUSTER,
    ".venv/bin/scrapy crawl web -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=redis://10.0.0.2:7000/0 -s FRONTIER_SHARDS=6": CLUSTER,
    ".venv/bin/scrapy frontier web -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=redis://10.0.0.1:7000/0 -s FRONTIER_SHARDS=6": CLUSTER,
    ".venv/bin/python bench/shared.py --only neardup --quick": (
        "skip: a benchmark (bench/, BENCHMARKS.md); tests/test_neardup_shared.py checks the "
        "decisions"
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt "
    "-s 'BACKEND_CLASSES={\"index\": \"mypackage.MyIndex\"}'": (
        "skip: mypackage.MyIndex stands for the reader's own class"
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s RECRAWL_INTERVAL=86400": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s RECRAWL_INTERVAL=86400 "
    "-s SITEMAPS_PROBE=True": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s CANONICAL_SCOPE=host": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s RECRAWL_INTERVAL=3600 "
    "-s RECRAWL_CONTINUOUS=True": "skip: continuous mode runs until it is stopped",
    '.venv/bin/scrapy search "mercator frontier"': "run",
    '.venv/bin/scrapy search "politeness" --site web -n 5': "run",
    ".venv/bin/scrapy neardup page-a.html page-b.html": "run",
    '.venv/bin/scrapy search --index demo-index.sqlite "harvest saffron"': "run",
    ".venv/bin/python bench/realcrawl.py --runs 1": (
        "skip: a benchmark over real documentation on nginx (bench/, BENCHMARKS.md)"
    ),
    ".venv/bin/python bench/realcrawl.py --configs ours --politeness 0.5 --window 40 --trees "
    "book,rust-by-example,error_codes,reference,cargo,edition-guide,nomicon,rustc,std,nodejs/api": (
        "skip: a benchmark over real documentation on nginx (bench/, BENCHMARKS.md)"
    ),
    ".venv/bin/python bench/pg_scale.py --quick": (
        "skip: a benchmark (bench/, BENCHMARKS.md); tests/test_pg_partitions.py checks the "
        "partitioned tables"
    ),
    ".venv/bin/python bench/realpages.py --per-tree 40": (
        "skip: a benchmark over Debian documentation packages (bench/, BENCHMARKS.md)"
    ),
    ".venv/bin/scrapy neardup /usr/share/doc/git-doc/git-am.html "
    "/usr/share/doc/git-doc/git-apply.html": "skip: needs Debian's git-doc package",
    "createdb crawl": (
        "skip: PostgreSQL; tests/test_shared_crawl.py crawls and searches on a database of its own"
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s RECRAWL_INTERVAL=86400 "
    "-s DATABASE_URL=postgresql://postgres@127.0.0.1:5432/crawl": "skip: PostgreSQL (as above)",
    '.venv/bin/scrapy search -s DATABASE_URL=postgresql://postgres@127.0.0.1:5432/crawl '
    '"mercator"': "skip: PostgreSQL (as above)",
    ".venv/bin/scrapy report crawls/web-1": "run",
    ".venv/bin/scrapy frontier web --metrics-port 9400 -s FRONTIER_BACKEND=redis "
    "-s REDIS_URL=redis://127.0.0.1:6379/0": (
        "skip: serves until stopped; tests/test_metrics_fleet.py runs it on a crawl"
    ),
    "promtool check rules deploy/prometheus/alerts.yml && (cd deploy/prometheus && "
    "promtool test rules alerts_test.yml)": (
        "skip: tests/test_metrics_alerts.py runs both"
    ),
    ".venv/bin/scrapy crawl web -s METRICS_PORT=9410": (
        "skip: a fixed port; tests/test_metrics.py crawls with METRICS_PORT on a free one"
    ),
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s STATS_FILE=stats.json": "run",
    """.venv/bin/python -c "import json; [print(b['url'], b['status'], 'on', b['found_on']) """
    """for b in json.load(open('stats.json')).get('broken_links', [])]\"""": "run",
    "mkdir -p sites && printf 'name = \"archive\"\\n[requisites]\\nfetch = true\\n' > "
    "sites/archive.toml": "run",
    ".venv/bin/scrapy crawl archive -a seeds=seeds.txt -s SITES_DIR=sites -s WARC_ENABLED=1 "
    "-s WARC_DIR=warc": "run",
    ".venv/bin/scrapy crawl web -a seeds=seeds.txt -s WARC_ENABLED=1 -s WARC_DIR=warc "
    "-s WARC_WACZ=1": "run",
    ".venv/bin/scrapy wacz warc -o crawl.wacz": "run",
    ".venv/bin/scrapy report example -o example.html": f"skip: {INTERNET} (the example crawl)",
    ".venv/bin/scrapy report w1/stats.record.jsonl w2/stats.record.jsonl -o crawl.html": (
        "skip: two workers' records; tests/test_report.py merges them into one report"
    ),
}
SETUP = (
    "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt "
    "&& .venv/bin/python -m devsite.demo"
)
COMMANDS[SETUP] = f"run the demo: creating the venv and pip install {INTERNET}"


def sources() -> list[Path]:
    """The README, then the docs pages, in the order their commands run."""
    return [README, *(DOCS / page for page in DOC_PAGES)]


def readme_commands() -> list[str]:
    """Each command of the ``sh`` blocks of the README and the docs pages, once, in order:
    continuation lines joined, comments cut."""
    commands: list[str] = []
    for source in sources():
        for block in re.findall(r"(?ms)^```sh\n(.*?)^```", source.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                if line and not line.startswith("#"):
                    command = " ".join(line.split())
                    if command not in commands:
                        commands.append(command)
    return commands


def test_every_docs_page_with_commands_is_read() -> None:
    with_commands = {
        page.relative_to(DOCS).as_posix()
        for page in DOCS.rglob("*.md")
        if re.search(r"(?m)^```sh$", page.read_text(encoding="utf-8"))
    }
    assert with_commands - set(DOC_PAGES) - set(HISTORY) == set()


def test_every_readme_command_is_listed() -> None:
    scrapyd = [c for c in readme_commands() if _is_scrapyd(c)]
    assert scrapyd, "the scrapyd section has commands"
    unlisted = [c for c in readme_commands() if c not in COMMANDS and not _is_scrapyd(c)]
    assert unlisted == [], "add these README and docs commands to tests/test_readme.py"


def _is_scrapyd(command: str) -> bool:
    return any(
        word in command
        for word in ("scrapyd", "$SCRAPYD", "CRAWLER=", "scrapyd-deploy", "jobs/web-1/crawl")
    )


def _shell(command: str, cwd: Path, redis_port: int, timeout: float = 180) -> str:
    python = shlex.quote(sys.executable)
    command = re.sub(
        r"(?<![\w/])\.venv/bin/(scrapy|python)\b",
        lambda m: f"{python} -m scrapy" if m.group(1) == "scrapy" else python,
        command,
    )
    command = command.replace(":6379/", f":{redis_port}/")
    command = command.replace("redis-cli ", f"redis-cli -p {redis_port} ")
    if " -m scrapy crawl " in command:
        command += " -s ALLOW_PRIVATE_ADDRESSES=True"
    env = dict(
        os.environ,
        PYTHONPATH=str(PROJECT),
        SCRAPY_SETTINGS_MODULE="crawler.settings",
        HOME=str(cwd),
    )
    out = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )
    assert out.returncode == 0, f"{command}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.stdout + out.stderr


@pytest.mark.integration
def test_the_readme_commands_run_as_written(tmp_path: Path) -> None:
    graph = build_site(
        [HostSpec("127.0.0.2", pages=1), HostSpec("127.0.0.3", pages=1)],
        links_per_page=1, cross_host_links=1, extras=False,
    )
    redis_port = free_port()
    redis: subprocess.Popen[bytes] | None = None
    ran = []
    with SiteServer(graph) as server:
        (tmp_path / "seeds.txt").write_text("\n".join(server.seeds()) + "\n")
        for name, url in (("page-a.html", server.seeds()[0]), ("page-b.html", server.seeds()[1])):
            with urllib.request.urlopen(url, timeout=10) as page:  # loopback only
                (tmp_path / name).write_bytes(page.read())
        try:
            for command in readme_commands():
                action = COMMANDS.get(command, "skip: scrapyd")
                if action == "start redis":
                    redis, redis_port = _start_redis(shlex.split(command.rstrip("&")), tmp_path)
                elif action.startswith("run the demo"):
                    out = _shell(command.split(" && ")[-1], tmp_path, redis_port)
                    assert "demo: crawled" in out
                elif action == "run":
                    out = _shell(command, tmp_path, redis_port)
                    if " list" in command:
                        assert "example" in out.split() and "web" in out.split()
                else:
                    continue
                ran.append(command)
        finally:
            if redis is not None:
                redis.terminate()
                redis.wait(timeout=10)
    assert len(ran) >= 12
    assert (tmp_path / "crawl-index.sqlite").exists() and (tmp_path / "crawls/web-1").is_dir()


def _start_redis(args: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """README's redis-server command on a port free now (one picked earlier may have been
    taken meanwhile by another test's server: the README's install takes minutes); a server
    that exits at once (its port taken after all) is started again on another."""
    import time

    import redis as redis_py

    for _ in range(5):
        port = free_port()
        args[args.index("--port") + 1] = str(port)
        process = subprocess.Popen(
            [*args, "--save", "", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while process.poll() is None:
            try:
                redis_py.Redis(host="127.0.0.1", port=port).ping()
                return process, port
            except redis_py.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
    raise AssertionError("redis-server exited on five free ports")


@pytest.mark.integration
def test_the_readme_spider_runs_on_the_frontier(tmp_path: Path) -> None:
    """The docs' Python spider (docs/topics/items.md), as written, with its start URL and
    domain swapped for the test site's (the one change: the original crawls docs.python.org)."""
    code = re.search(r"(?ms)^```python\n# crawler/spiders/headings.py\n(.*?)^```", _text())
    assert code is not None
    graph = build_site([HostSpec("127.0.0.2", pages=3)], links_per_page=2, extras=False)
    with SiteServer(graph) as server:
        source = code.group(1).replace('"docs.python.org"', '"127.0.0.2"')
        source = source.replace('"https://docs.python.org/3/"', f'"{server.seeds()[0]}"')
        package = tmp_path / "myspiders"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "headings.py").write_text(source)
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(PROJECT), str(tmp_path)]),
            SCRAPY_SETTINGS_MODULE="crawler.settings",
        )
        out = subprocess.run(
            [sys.executable, "-m", "scrapy", "crawl", "headings", "-o", "headings.jsonl",
             "-s", "SPIDER_MODULES=myspiders", "-s", "ALLOW_PRIVATE_ADDRESSES=True",
             "-s", "FRONTIER_MIN_DELAY=0.05"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )
        fetched = [r.path for r in server.records]
        pages = graph.reachable(server.seeds())
    assert out.returncode == 0, out.stderr[-3000:]
    lines = (tmp_path / "headings.jsonl").read_text().splitlines()
    assert len(lines) == len(pages)  # every page, through the links
    assert fetched[0] == "/robots.txt" and len(fetched) == len(set(fetched))  # once each


def test_scrapyd_has_one_address() -> None:
    """deploy/scrapyd.conf sets it; scrapy.cfg's deploy target and the README's $SCRAPYD say
    the same."""
    conf = configparser.ConfigParser()
    conf.read(PROJECT / "deploy" / "scrapyd.conf")
    address = f"http://{conf['scrapyd']['bind_address']}:{conf['scrapyd']['http_port']}"
    cfg = configparser.ConfigParser()
    cfg.read(PROJECT / "scrapy.cfg")
    assert cfg["deploy"]["url"] == address
    assert f"SCRAPYD={address} " in _text()
    assert "127.0.0.1:6800" not in _text().replace(f"SCRAPYD={address}", "")


def _text() -> str:
    """The README and the docs pages, as one text."""
    return "\n".join(source.read_text(encoding="utf-8") for source in sources())

"""An ACL user (not ``default``) with a password, on one Redis and on a Redis Cluster, the
``default`` user off: real ``scrapy crawl`` workers log in with the user named in ``REDIS_URL``
(``redis://USER@host:port/0``) and the password from ``REDIS_PASSWORD_FILE`` or the variable
``REDIS_PASSWORD_ENV`` names, and neither the user's name nor the password reaches the crawl's
log, stats, items or JOBDIR. A crawl that does not log in, or whose user lacks a command, a key
or a channel the crawl uses (on one Redis, or on one master of a cluster), is refused in one
line, before any request.

What a crawl's user needs, at least (:func:`crawl_user_rules`, what the one-Redis crawl here is
allowed and no more; ``INFO errorstats`` shows no ``NOPERM``): the keys ``{<crawl>}:*`` and
``{<crawl>:*`` (the crawl's and its partitions' hash tags) and ``<site>:*`` (the seeds inbox);
the channel ``{<crawl>}:wake``; the read, write, transaction, scripting, pub/sub and connection
commands but the ``@dangerous`` ones; ``TIME`` (the frontier's clock); ``INFO`` and ``CONFIG
GET`` for the start-up checks (a cluster or not, the eviction policy); on RedisBloom
``BF.RESERVE``, ``BF.MADD``, ``BF.MEXISTS`` and ``BF.CARD``. On a cluster
(:func:`cluster_user_rules`) also ``CLUSTER SLOTS``; the replicas log in to their master as
another user (``masteruser``), the operator's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import finish_crawl, run_crawl, start_crawl
from tests.partition_support import seen_count
from tests.redis_cluster_support import RedisClusterServers, start_cluster
from tests.redis_support import RedisServer, fresh_key, server_kind, start_redis
from tests.test_redis_crawl import HOSTS, robots

pytestmark = pytest.mark.integration

USER = "frontier-wkr-" + "q" * 6  # a name found nowhere else in a crawl's files
SECRET = "acl-Pa55-" + "z" * 14

#: the crawls of the one-Redis and the cluster tests: the user's key patterns name them
CRAWL, CLUSTER_CRAWL = "acl-crawl", "acl-cluster-crawl"
#: the cluster's operator: every command, and the replicas' login to their master
OPERATOR, OPERATOR_SECRET = "operator", "op-Pa55-" + "w" * 12


def crawl_user_rules(crawl: str, site: str = "web") -> tuple[str, ...]:
    """The least a crawl's user needs (see the module docstring). A module's commands are in no
    category on Redis 7.0: RedisBloom's the seen-set sends are named one by one."""
    bloom = ("+bf.reserve", "+bf.madd", "+bf.mexists", "+bf.card")
    return (
        "resetkeys", f"~{{{crawl}}}:*", f"~{{{crawl}:*", f"~{site}:*",
        "resetchannels", f"&{{{crawl}}}:wake", f"&{{{crawl}}}:handover",
        "-@all", "+@read", "+@write", "+@transaction", "+@scripting", "+@pubsub",
        "+@connection", "+time", "-@dangerous", "+info", "+config|get",
        *(bloom if server_kind().name == "redis-bloom" else ()),
    )  # fmt: skip


def cluster_user_rules(crawl: str, site: str = "web") -> tuple[str, ...]:
    """A crawl's user on a cluster: what it needs on one Redis, and the slot map (the cluster
    client's ``CLUSTER SLOTS``; without it the crawl is refused)."""
    return (*crawl_user_rules(crawl, site), "+cluster|slots")


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(
        tmp_path_factory.mktemp("redis-acl"),
        username=USER,
        password=SECRET,
        acl=crawl_user_rules(CRAWL),
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """3 masters with a replica each, the ``default`` user off from the start: an operator's
    user with every command, the replicas' login to their master (``masteruser``), and on
    every node the crawl's user with the least it needs on a cluster."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("redis-cluster-acl"), username=OPERATOR, password=OPERATOR_SECRET
    )
    try:
        for node in cluster.live():
            with node.client() as c:
                c.execute_command(
                    "ACL", "SETUSER", USER, "on", f">{SECRET}", *cluster_user_rules(CLUSTER_CRAWL)
                )
        yield cluster
    finally:
        cluster.stop()


def small_site() -> RoutedSiteServer:
    """Three hosts of a few pages each, with their robots.txt: what a login needs to be shown
    working, in a few seconds of crawl."""
    graph = build_site([HostSpec(h, pages=4) for h in HOSTS[:3]], links_per_page=2, extras=False)
    server = RoutedSiteServer(graph)
    for host in HOSTS[:3]:
        server.route(host, "/robots.txt", robots)
    return server


def crawl_settings(url: str, tmp: Path, **extra: object) -> dict[str, object]:
    return {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": url,
        "FRONTIER_REDIS_KEY": fresh_key(),
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0,
        "JOBDIR": tmp / "job",
        **extra,
    }


def files_holding(root: Path, *secrets: str, besides: Path) -> list[tuple[Path, str]]:
    """The files under ``root`` (the crawl's log, stats, items, JOBDIR) that hold a secret."""
    return [
        (p, s)
        for p in root.rglob("*")
        if p.is_file() and p != besides
        for s in secrets
        if s.encode() in p.read_bytes()
    ]


def check_secrets_kept(tmp_path: Path, log: str, secret_file: Path) -> None:
    assert USER not in log and SECRET not in log
    assert files_holding(tmp_path, USER, SECRET, besides=secret_file) == []


def test_an_acl_user_crawls_one_redis_and_its_name_and_password_stay_out_of_the_crawl(
    tmp_path: Path, acl_redis: RedisServer
) -> None:
    secret_file = tmp_path / "redis.pass"
    secret_file.write_text(SECRET + "\n")
    url = f"redis://{USER}@127.0.0.1:{acl_redis.port}/0"
    settings = crawl_settings(
        url, tmp_path, REDIS_PASSWORD_FILE=secret_file, FRONTIER_REDIS_KEY=CRAWL
    )
    with small_site() as server:
        proc = start_crawl(tmp_path, seeds=server.seeds(), settings=settings)
        assert SECRET not in " ".join(map(str, proc.args))  # not in ps, not in scrapyd's log
        result = finish_crawl(proc, tmp_path, timeout=120)
        fetched = {(r.host, r.path) for r in server.records if r.path != "/robots.txt"}
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.log[
        -3000:
    ]
    assert fetched and result.stats.get("pages/ok") == len(fetched)
    with acl_redis.client() as client:
        assert seen_count(client, CRAWL) >= len(fetched)
        refused = client.info("errorstats")
    assert "errorstat_NOPERM" not in refused, refused  # the user's rules were enough
    check_secrets_kept(tmp_path, result.log, secret_file)


def test_a_crawl_that_does_not_log_in_is_refused_in_one_line(
    tmp_path: Path, acl_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No user and no password (the ``default`` user is off), then the password without the
    user (it is not ``default``'s): each refused before any request, in one line."""
    monkeypatch.setenv("CRAWL_REDIS_PASSWORD", SECRET)
    plain = f"redis://127.0.0.1:{acl_redis.port}/0"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with small_site() as server:
        anonymous = run_crawl(
            tmp_path / "a", seeds=server.seeds(), settings=crawl_settings(plain, tmp_path / "a")
        )
        unnamed = run_crawl(
            tmp_path / "b",
            seeds=server.seeds(),
            settings=crawl_settings(
                plain, tmp_path / "b", REDIS_PASSWORD_ENV="CRAWL_REDIS_PASSWORD"
            ),
        )
        fetched = list(server.records)
    assert fetched == []
    for name, result in (("a", anonymous), ("b", unnamed)):
        assert result.returncode == 2, result.log[-3000:]
        log = (tmp_path / name / "crawl.log").read_text()
        refusals = [line for line in log.splitlines() if "refused the crawl's login" in line]
        assert len(refusals) == 1 and "ERROR" in refusals[0], log[-3000:]
        assert SECRET not in result.log
    assert "invalid username-password pair or user is disabled" in unnamed.log


def test_an_acl_user_crawls_through_a_cluster_and_after_a_failover(
    tmp_path: Path, acl_cluster: RedisClusterServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replicas logged in to their masters as the operator's user (their links are up);
    one master is killed and its replica takes over; a crawl given any node and the crawl's
    user (the least rules) then works through every master, no command refused on any node,
    the user's name and password in none of its files."""
    assert all(v == "up" for v in replica_links(acl_cluster))
    acl_cluster.kill_master(acl_cluster.masters_with_replicas()[0])
    monkeypatch.setenv("CRAWL_REDIS_PASSWORD", SECRET)
    url = f"redis://{USER}@{acl_cluster.live()[-1].address}/0"
    settings = crawl_settings(
        url, tmp_path, REDIS_PASSWORD_ENV="CRAWL_REDIS_PASSWORD", FRONTIER_REDIS_KEY=CLUSTER_CRAWL
    )
    with small_site() as server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=settings)
        fetched = {(r.host, r.path) for r in server.records if r.path != "/robots.txt"}
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.log[
        -3000:
    ]
    assert fetched and result.stats.get("pages/ok") == len(fetched)
    with acl_cluster.client() as client:
        assert seen_count(client, CLUSTER_CRAWL) >= len(fetched)
    for node in acl_cluster.live():
        with node.client() as c:
            refused = c.info("errorstats")
        assert "errorstat_NOPERM" not in refused, (node.address, refused)
    check_secrets_kept(tmp_path, result.log, tmp_path / "none")


def replica_links(cluster: RedisClusterServers) -> list[str]:
    """Each replica's ``master_link_status``."""
    out = []
    for node in cluster.live():
        with node.client() as c:
            info = c.info("replication")
        if info.get("role") == "slave":
            out.append(str(info.get("master_link_status")))
    return out


def test_messages_show_neither_the_user_nor_the_password() -> None:
    from scrapy.settings import Settings

    from crawler.backends.redis.connection import safe_url

    def shown(url: str) -> str:
        return safe_url(Settings({"REDIS_URL": url}))

    assert shown(f"redis://{USER}@127.0.0.1:6379/0") == "redis://***@127.0.0.1:6379/0"
    assert shown(f"rediss://{USER}:{SECRET}@[::1]:6380/0") == "rediss://***@[::1]:6380/0"
    assert shown(f"redis://:{SECRET}@redis.internal/0") == "redis://***@redis.internal/0"
    assert shown("redis://redis.internal:6379/0") == "redis://redis.internal:6379/0"


#: the crawl of the refusal tests: each user there lacks one thing the crawl needs
PROBED_CRAWL = "acl-probed-crawl"


@pytest.fixture(scope="module")
def operated_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One Redis whose only user is the operator's (every command): each test adds the crawl
    user it needs with ``ACL SETUSER``."""
    server = start_redis(
        tmp_path_factory.mktemp("redis-operated"), username=OPERATOR, password=OPERATOR_SECRET
    )
    try:
        yield server
    finally:
        server.stop()


def without(rules: tuple[str, ...], *dropped: str) -> tuple[str, ...]:
    return tuple(r for r in rules if r not in dropped)


def need_bloom() -> None:
    if server_kind().name != "redis-bloom":
        pytest.skip("only the redis-bloom kind's server has BF.*")


def check_refused(tmp_path: Path, url: str, what: str, rules: tuple[str, ...]) -> None:
    """A crawl as ``USER`` is refused before any request, in one line (exit code 2) that names
    ``what`` the user was refused and the rules it needs, and neither its name nor its
    password."""
    settings = crawl_settings(
        url, tmp_path, REDIS_PASSWORD_ENV="CRAWL_REDIS_PASSWORD", FRONTIER_REDIS_KEY=PROBED_CRAWL
    )
    with small_site() as server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=settings)
        fetched = list(server.records)
    assert fetched == [], result.log[-3000:]
    assert result.returncode == 2, result.log[-3000:]
    log = (tmp_path / "crawl.log").read_text()
    refusals = [line for line in log.splitlines() if "refuses the crawl's user" in line]
    assert len(refusals) == 1 and "ERROR" in refusals[0], log[-3000:]
    line = refusals[0]
    assert what in line and " ".join(rules).replace(USER, "<user>") in line, line
    assert SECRET not in result.log and USER not in result.log


@pytest.mark.parametrize(
    ("dropped", "what"),
    [
        ("+time", "the command TIME"),
        ("+@connection", "the command PING, the command COMMAND"),
        (f"&{{{PROBED_CRAWL}}}:handover", f"the channel {{{PROBED_CRAWL}}}:handover"),
        ("+bf.madd", "the command BF.MADD"),
    ],
    ids=["time", "connection", "handover-channel", "bf-madd"],
)
def test_a_user_without_what_the_crawl_runs_is_refused_in_one_line(
    tmp_path: Path,
    operated_redis: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    dropped: str,
    what: str,
) -> None:
    """A user that lacks TIME (the frontier's clock), the connection commands (PING, and the
    COMMAND INFO that asks for RedisBloom), the handover channel (its wake-ups) or, on
    RedisBloom, BF.MADD (every page's links) is refused at start, whatever it lacks named;
    nothing the probe sends runs (it is discarded)."""
    if dropped.startswith("+bf."):
        need_bloom()
    rules = crawl_user_rules(PROBED_CRAWL)
    with operated_redis.client() as c:
        given = without(rules, dropped)
        c.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{SECRET}", *given)
    monkeypatch.setenv("CRAWL_REDIS_PASSWORD", SECRET)
    url = f"redis://{USER}@127.0.0.1:{operated_redis.port}/0"
    check_refused(tmp_path, url, what, rules)
    with operated_redis.client() as c:
        assert c.keys(f"*{PROBED_CRAWL}*") == []  # the probe changed nothing


def test_a_cluster_master_that_refuses_a_channel_refuses_the_crawl(
    tmp_path: Path, acl_cluster: RedisClusterServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each node keeps its own ACL users: one master whose crawl user lacks the handover
    channel (the others have it) is found at start, and named."""
    rules = cluster_user_rules(PROBED_CRAWL)
    odd = acl_cluster.masters()[-1]
    for node in acl_cluster.live():
        given = without(rules, f"&{{{PROBED_CRAWL}}}:handover") if node is odd else rules
        with node.client() as c:
            c.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{SECRET}", *given)
    monkeypatch.setenv("CRAWL_REDIS_PASSWORD", SECRET)
    url = f"redis://{USER}@{acl_cluster.live()[0].address}/0"
    what = f"the channel {{{PROBED_CRAWL}}}:handover (SUBSCRIBE, PUBLISH) on {odd.address}"
    try:
        check_refused(tmp_path, url, what, rules)
    finally:
        for node in acl_cluster.live():  # the crawl user of the other tests, as it was
            with node.client() as c:
                c.execute_command(
                    "ACL", "SETUSER", USER, "reset", "on", f">{SECRET}",
                    *cluster_user_rules(CLUSTER_CRAWL),
                )  # fmt: skip


@pytest.mark.parametrize(
    ("denied", "what"),
    [
        ("-watch", "the command WATCH"),
        ("-script|load", "the command SCRIPT"),
        ("-xautoclaim", "the command XAUTOCLAIM"),
        ("-xgroup|create", "the command XGROUP"),
        ("-xack", "the command XACK"),
    ],
    ids=["watch", "script-load", "xautoclaim", "xgroup-create", "xack"],
)
def test_a_user_denied_a_command_the_crawl_runs_later_is_refused_at_start(
    tmp_path: Path,
    operated_redis: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    denied: str,
    what: str,
) -> None:
    """Commands the crawl runs only now and then (WATCH for robots.txt, SCRIPT LOAD when a
    script is missing, the inbox's XAUTOCLAIM, XGROUP CREATE and XACK) are probed at start
    too: a user denied one is refused before any request, not mid-crawl."""
    rules = crawl_user_rules(PROBED_CRAWL)
    with operated_redis.client() as c:
        c.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{SECRET}", *rules, denied)
    monkeypatch.setenv("CRAWL_REDIS_PASSWORD", SECRET)
    url = f"redis://{USER}@127.0.0.1:{operated_redis.port}/0"
    check_refused(tmp_path, url, what, rules)
    with operated_redis.client() as c:
        assert c.keys(f"*{PROBED_CRAWL}*") == []  # the probe changed nothing

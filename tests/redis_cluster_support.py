"""A real Redis Cluster for tests: ``redis-server --cluster-enabled yes`` processes on free
loopback ports, joined by ``redis-cli --cluster create`` (3 masters with a replica each by
default), stopped when the test module ends. The server and its cli are of the kind
``CRAWLER_TEST_REDIS`` names (tests/redis_support.py): ``valkey-cli`` for Valkey.

Use it with ``from tests.redis_cluster_support import redis_cluster  # noqa: F401`` and ask for
``redis_cluster`` (a :class:`RedisClusterServers`). The operator's tools are real too: growing
the cluster is ``redis-cli --cluster add-node`` and ``reshard`` (:meth:`add_master`,
:meth:`move_slots`), a failover is a master killed with SIGKILL and its replica promoted by the
cluster itself (:meth:`kill_master`). Without ``redis-server``/``redis-cli`` the tests skip,
except under CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.connection import ReshardingCluster
from tests.redis_support import (
    ACL_EVERYTHING,
    TlsFiles,
    acl_arguments,
    free_port,
    server_kind,
    tls_arguments,
    tls_client_params,
)


@dataclass
class ClusterNode:
    port: int
    process: subprocess.Popen[bytes]
    #: what a client of this node must give: the ACL user and password, the TLS files
    login: dict[str, Any] = field(default_factory=dict)
    bus: int = 0  # its cluster bus port (a node started again keeps both ports)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **self.login)

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class RedisClusterServers:
    root: Path
    nodes: list[ClusterNode] = field(default_factory=list)
    node_timeout_ms: int = 1000
    aof: str | None = None
    #: an ACL user (with ``password``) on every node, the replicas' ``masteruser``; the
    #: ``default`` user off
    username: str | None = None
    password: str | None = None
    #: TLS only (``port 0``), for clients, replication and the cluster bus
    tls: TlsFiles | None = None

    @property
    def login(self) -> dict[str, Any]:
        """What a client of any node must give (:attr:`ClusterNode.login`)."""
        out: dict[str, Any] = {}
        if self.username is not None:
            out.update(username=self.username, password=self.password)
        if self.tls is not None:
            out.update(tls_client_params(self.tls))
        return out

    def _secure_arguments(self) -> list[str]:
        out: list[str] = []
        if self.username is not None:
            assert self.password is not None, "an ACL user needs a password"
            out += acl_arguments(self.username, self.password, ACL_EVERYTHING)
            out += ["--masteruser", self.username, "--masterauth", self.password]
        if self.tls is not None:
            out += tls_arguments(self.tls)
            out += ["--tls-cluster", "yes", "--tls-replication", "yes"]
        return out

    def _cli_arguments(self) -> list[str]:
        """redis-cli's options to log in to the nodes (``--pass``: a test's throwaway
        password; an operator would give ``REDISCLI_AUTH``)."""
        out: list[str] = []
        if self.username is not None:
            assert self.password is not None
            out += ["--user", self.username, "--pass", self.password, "--no-auth-warning"]
        if self.tls is not None:
            out += ["--tls", "--cacert", str(self.tls.ca),
                    "--cert", str(self.tls.client_cert), "--key", str(self.tls.client_key)]
        return out

    # -- starting ------------------------------------------------------------------------------

    def _spawn(self, ports: tuple[int, int] | None = None) -> ClusterNode:
        """A node on free ports, or on ``ports`` (its port and bus port: a node started again
        on its files, its nodes.conf and AOF)."""
        kind = server_kind()
        for _ in range(3 if ports is None else 1):
            # the bus port: not port + 10000, may be > 65535
            port, bus = ports if ports is not None else (free_port(), free_port())
            persistence = ["--appendonly", "no"]
            if self.aof is not None:
                persistence = ["--appendonly", "yes", "--appendfsync", self.aof]
            listen = ["--port", str(port)]
            if self.tls is not None:
                listen = ["--port", "0", "--tls-port", str(port)]
            process = subprocess.Popen(
                [
                    kind.server,
                    *kind.arguments,
                    *listen,
                    *self._secure_arguments(),
                    "--bind", "127.0.0.1",
                    "--cluster-enabled", "yes",
                    "--cluster-port", str(bus),
                    "--cluster-config-file", f"nodes-{port}.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms),
                    # a replica of an idle master may take over however long ago it last heard
                    "--cluster-replica-validity-factor", "0",
                    "--repl-ping-replica-period", "1",
                    "--repl-diskless-sync-delay", "0",
                    "--save", "",
                    *persistence,
                    "--appendfilename", f"appendonly-{port}.aof",
                    "--appenddirname", f"aof-{port}",
                    "--dir", str(self.root),
                    "--logfile", str(self.root / f"redis-{port}.log"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            node = ClusterNode(port, process, self.login, bus)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and node.alive():
                try:
                    with node.client() as c:
                        if c.ping():
                            return node
                except redis.ConnectionError:
                    time.sleep(0.05)
            process.kill()
            process.wait()
        raise RuntimeError("a cluster node did not start")

    def _cli(self, *args: str, timeout: float = 120) -> str:
        cli = server_kind().cli
        done = subprocess.run(
            [cli, *self._cli_arguments(), "--cluster", *args, "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster {args[0]} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def create(self, masters: int = 3, replicas: int = 1) -> None:
        self.nodes = [self._spawn() for _ in range(masters * (1 + replicas))]
        self._cli(
            "create", *[n.address for n in self.nodes], "--cluster-replicas", str(replicas)
        )
        self.wait_ok()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # every replica known to every node
            views = [self.cluster_nodes(node) for node in self.live()]
            if all(sum("slave" in r["flags"] for r in v) == masters * replicas for v in views):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the cluster's replicas did not all join")
        self.wait_replicas_synced()

    def wait_replicas_synced(self, timeout: float = 30) -> None:
        """Until every replica's link to its master is up (its first full sync done)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            synced = True
            for node in self.live():
                with node.client() as c:
                    info = c.info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    synced = False
            if synced:
                return
            time.sleep(0.2)
        raise RuntimeError("the cluster's replicas did not sync")

    # -- looking -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``REDIS_URL`` naming one live node (any node will do for a cluster client), without
        the user (the crawl's settings give it)."""
        scheme = "rediss" if self.tls is not None else "redis"
        return f"{scheme}://{self.live()[0].address}"

    def live(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive()]

    def client(self) -> RedisCluster:
        """A cluster client of the crawler's class (it follows a reshard's redirects to a
        new master)."""
        node = self.live()[0]
        return ReshardingCluster(host="127.0.0.1", port=node.port, **self.login)

    def cluster_nodes(self, node: ClusterNode | None = None) -> list[dict[str, str]]:
        """``CLUSTER NODES`` as one dict per node (id, address, flags, master, slots), as
        ``node`` (else the first live node) sees it."""
        with (node or self.live()[0]).client() as c:
            text = c.execute_command("CLUSTER", "NODES")
        text = text.decode() if isinstance(text, bytes) else text
        out = []
        for line in text.strip().splitlines():
            parts = line.split()
            out.append(
                {
                    "id": parts[0],
                    "address": parts[1].split("@")[0],
                    "flags": parts[2],
                    "master": parts[3],
                    "slots": " ".join(parts[8:]),
                }
            )
        return out

    def masters(self) -> list[ClusterNode]:
        """Live masters that own slots, in the order of their first slot."""
        by_address = {n.address: n for n in self.live()}
        rows = [
            r
            for r in self.cluster_nodes()
            if "master" in r["flags"] and "fail" not in r["flags"] and r["slots"]
        ]
        rows.sort(key=lambda r: int(r["slots"].split()[0].split("-")[0].strip("[")))
        return [by_address[r["address"]] for r in rows if r["address"] in by_address]

    def masters_with_replicas(self) -> list[ClusterNode]:
        """The masters :meth:`kill_master` can fail over (those with a replica)."""
        ids = {r["master"] for r in self.cluster_nodes() if "slave" in r["flags"]}
        return [m for m in self.masters() if self.node_id(m) in ids]

    def node_id(self, node: ClusterNode) -> str:
        with node.client() as c:
            value = c.execute_command("CLUSTER", "MYID")
        return value.decode() if isinstance(value, bytes) else value

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every live node says ``cluster_state:ok`` and agrees on the slots: the same
        owner for every slot, a live node each. A node says ``ok`` while it still believes a
        killed master serves its slots (it has not heard of the failure yet): a client that
        asks it then is sent to the dead master, and the node goes ``fail`` once it hears."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                states, owners = [], []
                for node in self.live():
                    with node.client() as c:
                        info = c.execute_command("CLUSTER", "INFO")
                    info = info.decode() if isinstance(info, bytes) else info
                    states.append("cluster_state:ok" in info)
                    owners.append(self._slot_owners(node))
                    last = info
                live = {n.address for n in self.live()}
                agreed = all(o == owners[0] for o in owners)
                if all(states) and agreed and {a for _, a in owners[0]} <= live:
                    return
                if not agreed or not {a for _, a in owners[0]} <= live:
                    last = f"slot owners seen by each node: {owners}"
            except redis.RedisError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(f"the cluster did not settle: {last}")

    def _slot_owners(self, node: ClusterNode) -> set[tuple[str, str]]:
        """(slot range, address of its master) as ``node`` sees them; slots being migrated
        (``[slot->-node]``) left out."""
        return {
            (part, row["address"])
            for row in self.cluster_nodes(node)
            if "master" in row["flags"]
            for part in row["slots"].split()
            if not part.startswith("[")
        }

    # -- what an operator does -----------------------------------------------------------------

    def add_master(self) -> ClusterNode:
        """``redis-cli --cluster add-node``: a new, empty master."""
        node = self._spawn()
        self.nodes.append(node)
        self._cli("add-node", node.address, self.live()[0].address)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(r["address"] == node.address for r in self.cluster_nodes()):
                break
            time.sleep(0.2)
        self.wait_ok()
        return node

    def move_slots(self, slots: int, to: ClusterNode, source: ClusterNode | None = None) -> str:
        """``redis-cli --cluster reshard``: move ``slots`` slots to ``to`` (from ``source``,
        else from every master), keys and all, while clients keep running."""
        args = [
            "reshard", self.live()[0].address,
            "--cluster-from", self.node_id(source) if source else "all",
            "--cluster-to", self.node_id(to),
            "--cluster-slots", str(slots),
            "--cluster-pipeline", "100",
        ]  # fmt: skip
        return self._cli(*args, timeout=300)

    def kill_master(
        self, node: ClusterNode, timeout: float = 30, replica_lag: float = 0.0
    ) -> ClusterNode:
        """SIGKILL a master and wait until its replica has taken over; returns the new master.
        ``replica_lag``: seconds the replicas are stopped (SIGSTOP) and cut off before the
        kill, so the master's last writes of that time never reach them (a replica behind
        under load, a network hiccup): what asynchronous replication loses in a failover."""
        node_id = self.node_id(node)
        replicas = [r for r in self.cluster_nodes() if r["master"] == node_id]
        if not replicas:
            raise ValueError(f"master {node.address} has no replica to take over")
        by_address = {n.address: n for n in self.live()}
        lagging = [by_address[r["address"]] for r in replicas if r["address"] in by_address]
        if replica_lag > 0:
            for replica in lagging:
                replica.process.send_signal(signal.SIGSTOP)
            with node.client() as c:  # what the master sent is in the replicas' socket buffers:
                c.execute_command("CLIENT", "KILL", "TYPE", "replica")  # cut the link too
            time.sleep(replica_lag)
        node.process.send_signal(signal.SIGKILL)
        node.process.wait()
        for replica in lagging if replica_lag > 0 else []:
            replica.process.send_signal(signal.SIGCONT)
        by_address = {n.address: n for n in self.live()}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in replicas:
                successor = by_address.get(r["address"])
                if successor is None:
                    continue
                try:
                    with successor.client() as c:
                        role = c.execute_command("ROLE")[0]
                except redis.RedisError:
                    continue
                if role in (b"master", "master"):
                    self.wait_ok()
                    return successor
            time.sleep(0.2)
        raise RuntimeError("no replica took over from the killed master")

    def kill_all(self) -> None:
        """SIGKILL every node at once: the cluster gone whole (a restart of all its nodes, a
        worker cut off from them all)."""
        for node in self.live():
            node.process.send_signal(signal.SIGKILL)
        for node in self.nodes:
            node.process.wait()

    def start_again(self) -> None:
        """Every node killed started again on its ports and files (nodes.conf, AOF), and the
        cluster settled."""
        self.nodes = [n if n.alive() else self._spawn((n.port, n.bus)) for n in self.nodes]
        self.wait_ok()

    def stop(self) -> None:
        for node in self.nodes:
            if node.alive():
                node.process.terminate()
        for node in self.nodes:
            try:
                node.process.wait(10)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()


def start_cluster(
    root: Path,
    masters: int = 3,
    replicas: int = 1,
    aof: str | None = None,
    *,
    username: str | None = None,
    password: str | None = None,
    tls: TlsFiles | None = None,
) -> RedisClusterServers:
    """A cluster formed and settled; ``username``/``password``: an ACL user on every node from
    its start (the ``default`` user off), ``tls``: TLS only (see :class:`RedisClusterServers`)."""
    if tls is not None and not server_kind().tls:
        pytest.skip(f"the {server_kind().name} kind's server is built without TLS")
    cluster = RedisClusterServers(root, aof=aof, username=username, password=password, tls=tls)
    try:
        cluster.create(masters, replicas)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()

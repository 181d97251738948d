"""A real DNS server for tests: ``devsite.dnsserver`` (Twisted's own DNS server) in a process of
its own on a free loopback port, with the queries it answered read back from its log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent


@dataclass
class DnsServer:
    port: int
    log: Path
    proc: subprocess.Popen[str]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def queries(self) -> Counter[str]:
        """How many times each name was asked (any record type)."""
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        return Counter(line.split()[0] for line in lines if line.strip())


@contextmanager
def dns_server(root: Path, zone: dict[str, Any]) -> Iterator[DnsServer]:
    """Serve ``zone`` (see ``devsite.dnsserver``) until the block ends."""
    root.mkdir(parents=True, exist_ok=True)
    zone_file, log = root / "zone.json", root / "queries.log"
    zone_file.write_text(json.dumps(zone), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "devsite.dnsserver", str(zone_file), str(log)],
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server listens (or dies)
        if not line.startswith("PORT "):
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"DNS server did not start: {line}{err}")
        yield DnsServer(int(line.split()[1]), log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(predicate: Any, what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` if it never is."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)

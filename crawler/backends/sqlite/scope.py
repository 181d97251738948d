"""The crawl's scope kept beside the frontier on disk: ``JOBDIR/scope-hosts.txt``."""

from __future__ import annotations

from pathlib import Path

from crawler.frontier.scope import ScopeRegistry


class FileScopeRegistry(ScopeRegistry):
    """``JOBDIR/scope-hosts.txt``: a resumed crawl does not see its seeds' redirects again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._hosts = self.load()

    def load(self) -> set[str]:
        if not self.path.exists():
            return set()
        return {line.strip() for line in self.path.read_text().splitlines() if line.strip()}

    def add(self, host: str) -> None:
        if host in self._hosts:
            return
        self._hosts.add(host)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(f"{h}\n" for h in sorted(self._hosts)))
        tmp.replace(self.path)

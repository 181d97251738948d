"""A real scrapyd for tests: started on a free loopback port with its own directories, fed with
an egg built by ``scrapyd-deploy`` from a copy of the project, and driven through its JSON API.

Everything a test needs to know about the server is in files under one temporary folder, and
nothing is written into the working tree: other people edit it while tests run, and a stray
``build/`` or ``setup.py`` there would end up in a commit.
"""

from __future__ import annotations

import configparser
import contextlib
import fnmatch
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.crawling import setting_text

PROJECT = Path(__file__).resolve().parent.parent
TEMPLATE = PROJECT / "deploy" / "scrapyd.conf"
PROJECT_NAME = "crawler"  # scrapy.cfg's [deploy] project
# What scrapyd-deploy needs to build the egg: the package, the packaging and the config files.
DEPLOY_FILES = ("scrapy.cfg", "setup.py", "pyproject.toml", "requirements.txt", ".gitignore")
DEPLOY_DIRS = ("crawler",)
# Environment that must not reach scrapyd: each would let a crawl import the working tree or a
# developer's own config instead of the deployed egg and the test's config.
_LEAKY_ENV = ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE", "SCRAPY_PROJECT", "SCRAPY_PYTHON_SHELL")


class ScrapydError(RuntimeError):
    """scrapyd answered ``{"status": "error"}``, or did not come up."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (scrapyd has no "port 0" mode)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scrapyd:
    """One scrapyd process whose config, eggs, logs, items and databases live under ``root``.

    It runs in ``root`` with ``HOME`` pointed there and no ``PYTHONPATH``, so neither the
    developer's ``~/.scrapyd.conf`` nor the checkout can change what it runs: the crawl processes
    can only import ``crawler`` from the deployed egg (:meth:`project_importable` checks that).
    It is started in a new session and stopped by process group, so crawls it spawned cannot
    outlive a failed test.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.eggs_dir = root / "eggs"
        self.logs_dir = root / "logs"
        self.items_dir = root / "items"
        self.dbs_dir = root / "dbs"
        self.config_path = root / "scrapyd.conf"
        self.pidfile = root / "twistd.pid"
        self.logfile = root / "scrapyd.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.env = {k: v for k, v in os.environ.items() if k not in _LEAKY_ENV}
        self.env["HOME"] = str(root)

    @property
    def url(self) -> str:
        """Base URL, without the trailing "/" that makes scrapyd-client's commands answer 404."""
        return f"http://127.0.0.1:{self.port}"

    # --- process ---

    def write_config(self, port: int) -> None:
        """The committed template, with this server's port and directories."""
        config = configparser.ConfigParser()
        config.read(TEMPLATE, encoding="utf-8")
        config["scrapyd"].update(
            {
                "bind_address": "127.0.0.1",
                "http_port": str(port),
                "eggs_dir": str(self.eggs_dir),
                "logs_dir": str(self.logs_dir),
                "items_dir": str(self.items_dir),
                "dbs_dir": str(self.dbs_dir),
                "jobs_dir": "",
                "max_proc": "4",
                # The default 5 s would make every job wait up to 5 s before it starts.
                "poll_interval": "0.2",
                "username": "",
                "password": "",
            }
        )
        with self.config_path.open("w", encoding="utf-8") as f:
            config.write(f)

    def start(self, timeout: float = 30.0, attempts: int = 3) -> None:
        """Start scrapyd and wait until daemonstatus.json answers.

        A port picked by :func:`free_port` can be taken before scrapyd binds it, so a server that
        exits at start is retried on another port.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        for attempt in range(attempts):
            self.port = free_port()
            self.write_config(self.port)
            self.logfile.unlink(missing_ok=True)
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "scrapyd",
                    "--pidfile",
                    str(self.pidfile),
                    "--logfile",
                    str(self.logfile),
                ],
                cwd=self.root,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=(self.root / "scrapyd.stderr").open("ab"),
                start_new_session=True,
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                with contextlib.suppress(OSError, ValueError):
                    self.get("daemonstatus.json")
                    return
                time.sleep(0.1)
            self.stop()
            if attempt == attempts - 1:
                raise ScrapydError(f"scrapyd did not start on {self.url}:\n{self.server_log()}")

    def stop(self) -> None:
        """Stop scrapyd and every crawl it started (its process group): TERM, then KILL."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            # scrapyd is gone; crawls it spawned may still run in its group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            return

    def __enter__(self) -> Scrapyd:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def server_log(self) -> str:
        """scrapyd's own log (job starts and ends, the crawls' stderr)."""
        parts = [self.logfile, self.root / "scrapyd.stderr"]
        return "".join(p.read_text(errors="replace") for p in parts if p.exists())

    def project_importable(self) -> bool:
        """Whether ``crawler`` can be imported in scrapyd's environment without an egg."""
        probe = subprocess.run(
            [sys.executable, "-c", "import crawler"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            check=False,
        )
        return probe.returncode == 0

    # --- the JSON API ---

    def _call(self, request: urllib.request.Request) -> dict[str, Any]:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        if answer.get("status") != "ok":
            raise ScrapydError(f"{request.full_url}: {answer}")
        return answer

    def get(self, endpoint: str, **params: str) -> dict[str, Any]:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self._call(urllib.request.Request(f"{self.url}/{endpoint}{query}"))

    def post(self, endpoint: str, fields: Iterable[tuple[str, str]]) -> dict[str, Any]:
        """POST form fields; a list of pairs, since ``setting`` is repeated once per setting."""
        body = urllib.parse.urlencode(list(fields)).encode()
        return self._call(urllib.request.Request(f"{self.url}/{endpoint}", data=body))

    def fetch(self, path: str) -> str:
        """A file scrapyd serves, such as a job's ``log_url`` or ``items_url``."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as response:
            return str(response.read().decode("utf-8", errors="replace"))

    def schedule(
        self,
        spider: str,
        *,
        job: str,
        args: Mapping[str, str] | None = None,
        settings: Mapping[str, object] | None = None,
    ) -> str:
        """schedule.json: spider arguments as plain fields, settings as ``setting=KEY=VALUE``."""
        fields = [("project", PROJECT_NAME), ("spider", spider), ("jobid", job)]
        fields += list((args or {}).items())
        fields += [("setting", f"{k}={setting_text(v)}") for k, v in (settings or {}).items()]
        return str(self.post("schedule.json", fields)["jobid"])

    def cancel(self, job: str) -> str | None:
        """cancel.json: SIGINT to a running crawl (Scrapy's graceful shutdown). Returns the
        job's previous state, ``"running"`` or ``"pending"``."""
        answer = self.post("cancel.json", [("project", PROJECT_NAME), ("job", job)])
        return answer.get("prevstate")

    def job(self, job: str) -> tuple[str, dict[str, Any]] | None:
        """The job's state (pending, running, finished) and its listjobs.json entry."""
        jobs = self.get("listjobs.json", project=PROJECT_NAME)
        for state in ("pending", "running", "finished"):
            for entry in jobs[state]:
                if entry["id"] == job:
                    return state, entry
        return None

    def wait_for(
        self, job: str, state: str, timeout: float, *, check: Callable[[], None] | None = None
    ) -> dict[str, Any]:
        """Poll listjobs.json until ``job`` is in ``state``; returns its entry.

        ``check`` runs on every poll (e.g. to fail fast when the crawl misbehaves).
        """
        deadline = time.monotonic() + timeout
        seen: tuple[str, dict[str, Any]] | None = None
        while time.monotonic() < deadline:
            seen = self.job(job)
            if seen is not None and seen[0] == state:
                return seen[1]
            if check is not None:
                check()
            time.sleep(0.1)
        raise ScrapydError(
            f"job {job} not {state} after {timeout} s (last seen: {seen})\n"
            f"{self.server_log()[-4000:]}"
        )

    def job_log(self, spider: str, job: str) -> Path:
        return self.logs_dir / PROJECT_NAME / spider / f"{job}.log"

    def job_items(self, spider: str, job: str) -> Path:
        return self.items_dir / PROJECT_NAME / spider / f"{job}.jl"


# --- deploying -----------------------------------------------------------------------------------


@dataclass
class Deployment:
    """What ``scrapyd-deploy`` did: its answer, and the files it left in the project copy."""

    answer: dict[str, Any]
    output: str
    new_files: list[str]  # relative to the copy, created by the build
    not_ignored: list[str]  # of those, the ones .gitignore does not cover: must be none
    setup_py_changed: bool


def copy_project(dest: Path) -> Path:
    """The files scrapyd-deploy reads, copied to ``dest`` (no caches, no earlier builds)."""
    dest.mkdir(parents=True)
    for name in DEPLOY_FILES:
        if (PROJECT / name).exists():
            shutil.copy2(PROJECT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for name in DEPLOY_DIRS:
        shutil.copytree(PROJECT / name, dest / name, ignore=skip)
    return dest


def deploy(server: Scrapyd, workdir: Path, version: str) -> Deployment:
    """Run the real ``scrapyd-deploy`` in a copy of the project against ``server``.

    The copy's scrapy.cfg gets a ``[deploy:test]`` target with the server's URL; the rest is the
    committed project, including its ``setup.py``, so this also shows what a deploy from a
    checkout leaves behind.
    """
    copy_project(workdir)
    with (workdir / "scrapy.cfg").open("a", encoding="utf-8") as f:
        f.write(f"\n[deploy:test]\nurl = {server.url}\nproject = {PROJECT_NAME}\n")
    before = set(_files(workdir))
    setup_py = (workdir / "setup.py").read_bytes()
    script = Path(sys.executable).with_name("scrapyd-deploy")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "scrapyd_client.deploy"]
    proc = subprocess.run(
        [*command, "test", "--version", version],
        cwd=workdir,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise ScrapydError(f"scrapyd-deploy failed ({proc.returncode}):\n{output}")
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    new = sorted(set(_files(workdir)) - before)
    patterns = _gitignore_patterns(workdir / ".gitignore")
    return Deployment(
        answer=answer,
        output=output,
        new_files=new,
        not_ignored=[path for path in new if not gitignored(path, patterns)],
        setup_py_changed=(workdir / "setup.py").read_bytes() != setup_py,
    )


def _files(root: Path) -> Iterable[str]:
    for path in root.rglob("*"):
        if path.is_file():
            yield path.relative_to(root).as_posix()


def _gitignore_patterns(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [line.strip() for line in lines if line.strip() and not line.startswith(("#", "!"))]


def gitignored(path: str, patterns: Iterable[str]) -> bool:
    """Whether git would ignore ``path`` (POSIX, relative to the repository) under
    ``patterns``: enough of gitignore's rules for this project's file (names, globs, trailing
    "/" for directories, a "/" inside for paths from the root; no negation)."""
    parts = path.split("/")
    for pattern in patterns:
        dir_only = pattern.endswith("/")
        body = pattern.strip("/")
        anchored = "/" in body
        for i in range(len(parts)):
            is_dir = i < len(parts) - 1
            if dir_only and not is_dir:
                continue
            target = "/".join(parts[: i + 1]) if anchored else parts[i]
            if fnmatch.fnmatchcase(target, body):
                return True
    return False

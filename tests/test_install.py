"""From a fresh machine: the wheel installs in a clean venv outside the checkout, and its
``crawler`` command crawls from an empty folder, writing every output there.

The wheel is built as ``pip wheel`` builds it, from a copy of the checkout (the build writes
``build/`` and ``*.egg-info/`` next to the sources), without the network
(``--no-build-isolation``: this environment's setuptools). The clean venv has no package of its
own; a ``.pth`` file lends it this environment's site-packages, so pip finds every runtime
dependency the wheel declares already installed and the install runs offline
(``--no-index``): a dependency the wheel forgot to declare would still import, but a declared
one whose range excludes the tested pin fails the install. The crawl then runs with no
``PYTHONPATH`` and no ``scrapy.cfg`` anywhere above its folder: only the installed package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from devsite import HostSpec, SiteServer, build_site
from tests.conftest import checkout_files
from tests.crawling import PROJECT, record_url

_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv*", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"
)


def _runtime_pins() -> dict[str, str]:
    pins = {}
    for line in (PROJECT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            pins[_key(req.name)] = spec.version
    return pins


def _key(name: str) -> str:
    return name.lower().replace("_", "-")


def test_requirements_pin_what_the_package_declares() -> None:
    """requirements.txt (the tested versions, which CI and scrapyd install) and pyproject's
    dependencies (what ``pip install .`` installs) name the same packages, each pin inside its
    declared range."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {_key(r.name): r for r in map(Requirement, project["project"]["dependencies"])}
    pins = _runtime_pins()
    assert sorted(declared) == sorted(pins)
    outside = [f"{n}=={v}" for n, v in pins.items() if v not in declared[n].specifier]
    assert outside == []


def test_development_requirements_include_the_runtime_ones() -> None:
    dev = (PROJECT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
    assert dev[0] == "-r requirements.txt"


@pytest.mark.integration
def test_the_wheel_installs_and_crawls_from_an_empty_folder(tmp_path: Path) -> None:
    before = checkout_files()
    source = tmp_path / "source"
    shutil.copytree(PROJECT, source, ignore=_NOT_COPIED)
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "--disable-pip-version-check", "-w", str(wheels), "."], cwd=source)
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    dist_info = wheel.name.split("-")[0] + "-0.1.dist-info"
    assert {n.split("/")[0] for n in names} == {"crawler", dist_info}
    assert "crawler/sites/web.toml" in names and "crawler/report/templates/report.html" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                   cwd=tmp_path).strip()
    (Path(purelib) / "tested-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([str(python), "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
          str(wheel)], cwd=tmp_path)

    empty = tmp_path / "empty"
    empty.mkdir()
    graph = build_site([HostSpec("127.0.0.2", pages=3), HostSpec("127.0.0.3", pages=3)],
                       links_per_page=2, cross_host_links=1, extras=False)
    with SiteServer(graph) as server:
        seeds = ",".join(server.seeds())
        crawler = str(venv / "bin" / "crawler")
        out = _run([crawler, "crawl", "web", "-a", f"seeds={seeds}", "-s",
                    "ALLOW_PRIVATE_ADDRESSES=True", "-s", "FRONTIER_MIN_DELAY=0.05"], cwd=empty)
        fetched = {record_url(r) for r in server.records if r.path != "/robots.txt"}
    assert "Traceback" not in out
    assert fetched == graph.reachable(server.seeds())
    landed = {p.name for p in empty.iterdir()}
    assert {"crawl-index.sqlite", "crawl-record-web.jsonl"} <= landed
    # -C DIR: the same, in a data folder of the user's choosing (made if missing)
    out = _run([crawler, "-C", "empty", "search", "--index", "crawl-index.sqlite", "page"],
               cwd=tmp_path)
    assert out.startswith("Top ")
    _run([crawler, "-C", "data", "list"], cwd=empty)
    assert (empty / "data").is_dir()
    assert checkout_files() - before == set()


def _run(cmd: list[str], cwd: Path) -> str:
    # no PYTHONPATH (the tests' own), no settings module: only what is installed
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "SCRAPY_SETTINGS_MODULE", "VIRTUAL_ENV"}}
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
                         check=False)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout + out.stderr

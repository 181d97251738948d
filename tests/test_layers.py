"""The import contracts (.importlinter) hold, and they would catch a break of the layers.

Each case copies the package, plants one forbidden import and runs ``lint-imports`` on the copy:
a contract that cannot fail would let these through.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crawling import PROJECT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(
        PROJECT / "crawler", root / "crawler", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / ".importlinter", root / ".importlinter")
    return root


def test_the_shipped_code_keeps_its_layers(tmp_path: Path) -> None:
    out = lint(copy_project(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("crawler/frontier/politeness.py", "import scrapy", "free of Scrapy"),
        ("crawler/crawldb/api.py", "import twisted.internet", "free of Scrapy"),
        ("crawler/robots/rules.py", "import crawler.scheduler.adapter", "Layers"),
        ("crawler/middlewares/conditional.py", "import crawler.extensions.recrawl", "Layers"),
        ("crawler/pipelines/index.py", "import crawler.spiders.site", "Layers"),
        ("crawler/config/defaults.py", "import scrapy", "free of Scrapy"),
        ("crawler/config/defaults.py", "import crawler.frontier.urls", "Layers"),
        ("crawler/spiders/site.py", "import crawler.extensions.recrawl", "Spiders keep no state"),
        ("crawler/spiders/loader.py", "from crawler.crawldb import CrawlDb", "keep no state"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    root = copy_project(tmp_path)
    path = root / module
    path.write_text(path.read_text() + f"\n{line}  # planted by the test\n")
    out = lint(root)
    assert out.returncode != 0
    assert f"{broken}" in out.stdout and "BROKEN" in out.stdout

"""The documentation site builds, and its generated reference pages match the code.

``mkdocs build --strict`` fails on a broken link, a missing page or a page left out of the nav
(mkdocs.yml); its commands run in tests/test_readme.py. The reference pages of settings,
site-config keys, signals and stats keys are written by docs/gen_reference.py from their one
source each, so a setting added to crawler/config/defaults.py without regenerating them fails
here (the Redis keys page is checked by tests/test_redis_keys.py).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crawling import PROJECT


def _mkdocs_present() -> bool:
    return importlib.util.find_spec("mkdocs") is not None and (
        importlib.util.find_spec("material") is not None
    )


def test_the_site_builds_strict(tmp_path: Path) -> None:
    if not _mkdocs_present():
        assert os.environ.get("CI") != "true", "mkdocs is in requirements-dev.txt"
        pytest.skip("mkdocs and mkdocs-material are not installed")
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(PROJECT / "mkdocs.yml"),
         "-d", str(site)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert (site / "index.html").exists()
    assert (site / "reference" / "settings" / "index.html").exists()


def test_the_reference_pages_are_up_to_date() -> None:
    out = subprocess.run(
        [sys.executable, str(PROJECT / "docs" / "gen_reference.py"), "--check"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_setting_is_in_the_reference() -> None:
    from crawler.config import defaults

    page = (PROJECT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    assert [name for name in defaults.__all__ if f"| `{name}` |" not in page] == []


def test_every_setting_in_the_reference_says_what_it_does() -> None:
    """A public setting has a documented effect: its row's last cell is not empty (a setting
    under a group's comment shares it)."""
    page = (PROJECT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert rows
    assert [row.split(" | ")[0] for row in rows if row.rstrip().endswith("|  |")] == []

"""The session guard of tests/conftest.py: a test run that leaves a file in the checkout fails,
naming the file; one that leaves nothing passes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import checkout_files

GUARD = Path(__file__).resolve().parent / "conftest.py"


def _run_suite(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    checkout = tmp_path / "checkout"
    (checkout / "tests").mkdir(parents=True)
    shutil.copy(GUARD, checkout / "tests" / "conftest.py")
    (checkout / "tests" / "test_x.py").write_text(body, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_file_left_in_the_checkout_fails_the_run(tmp_path: Path) -> None:
    body = (
        "from pathlib import Path\n"
        "def test_writes():\n"
        "    Path('crawl-index.sqlite').write_text('x')\n"
    )
    out = _run_suite(tmp_path, body)
    assert out.returncode == 1, out.stdout
    assert "1 passed" in out.stdout
    assert "the tests left 1 new file(s) in the checkout" in out.stdout
    assert "crawl-index.sqlite" in out.stdout


def test_a_clean_run_passes(tmp_path: Path) -> None:
    out = _run_suite(tmp_path, "def test_nothing():\n    pass\n")
    assert out.returncode == 0, out.stdout
    assert "new file" not in out.stdout


def test_caches_are_not_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "crawldb-web.sqlite").write_bytes(b"")
    assert checkout_files(tmp_path) == {str(Path("sub") / "crawldb-web.sqlite")}

"""The scrapyd egg holds the product and nothing else.

Built exactly as ``scrapyd-deploy`` builds it (its ``--build-egg``, with the committed
``setup.py``), from a copy of the checkout in a temporary folder so the build's ``build/`` and
``*.egg-info/`` never land in the working tree. The egg must carry the site configs (without
them scrapyd lists no spiders) and the settings module, and must not carry the test site, the
demo, the labelled near-duplicate set, the tests or the benchmarks: none of them is imported by
a crawl, and the egg is what runs in production.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What a checkout holds besides the project; none of it may influence the build.
_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"
)


def _build_egg(tmp_path: Path) -> list[str]:
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=_NOT_COPIED)
    egg = tmp_path / "crawler.egg"
    deploy = Path(sys.executable).parent / "scrapyd-deploy"
    result = subprocess.run(
        [str(deploy), "--build-egg", str(egg)],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(egg) as archive:
        return archive.namelist()


def test_egg_holds_the_product_and_nothing_else(tmp_path: Path) -> None:
    names = _build_egg(tmp_path)
    sites = sorted(p.name for p in (REPO / "crawler" / "sites").glob("*.toml"))
    assert sites, "expected site configs in crawler/sites/"
    for site in sites:
        assert f"crawler/sites/{site}" in names
    assert "crawler/settings.py" in names
    assert "crawler/report/templates/report.html" in names
    assert "crawler/spiders/site.py" in names
    leaked = [
        name
        for name in names
        if name.split("/")[0] in {"devsite", "tests", "bench"}
        or any(word in name for word in ("devsite", "demo", "testset"))
    ]
    assert leaked == []

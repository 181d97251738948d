"""``crawler/defaults.py`` is the one place a default of the crawler's own settings is written.

The project settings ship exactly those values, and no getter falls back to a literal of its
own for one of those settings (a second copy that would drift when the default changes).
"""

from __future__ import annotations

import ast
import os

import pytest
from scrapy.settings import Settings
from scrapy.utils.project import get_project_settings

from crawler import defaults
from tests.crawling import PROJECT

PACKAGE = PROJECT / "crawler"
GETTERS = frozenset({"get", "getint", "getfloat", "getbool", "getlist", "getdict"})


def test_defaults_is_a_leaf_of_plain_constants() -> None:
    tree = ast.parse((PACKAGE / "defaults.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports == []
    assert defaults.__all__, "no defaults exported"
    for name in defaults.__all__:
        assert name.isupper()
        assert isinstance(getattr(defaults, name), (str, int, float, bool, type(None))), name


def test_the_shipped_settings_are_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``scrapy crawl`` loads from the project (scrapy.cfg at the root) has every default
    unchanged: settings.py takes them from crawler.defaults and overrides none."""
    monkeypatch.chdir(PROJECT)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    shipped = get_project_settings()
    assert os.environ.get("SCRAPY_SETTINGS_MODULE", "crawler.settings") == "crawler.settings"
    different = {
        name: (getattr(defaults, name), shipped.get(name))
        for name in defaults.__all__
        if name not in shipped or shipped.get(name) != getattr(defaults, name)
    }
    assert different == {}


def test_the_settings_module_overrides_no_default() -> None:
    module = Settings()
    module.setmodule("crawler.settings")
    for name in defaults.__all__:
        assert module.get(name) == getattr(defaults, name), name
    # ...and no assignment in settings.py shadows one (it would win over the import).
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    assigned = {
        t.id
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    assert assigned & set(defaults.__all__) == set()

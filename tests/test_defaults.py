"""``crawler/config/defaults.py`` is the one place a default of the crawler's own settings is
written.

The project settings ship exactly those values, and no getter falls back to a literal of its
own for one of those settings (a second copy that would drift when the default changes).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.project import get_project_settings

from crawler.config import defaults
from tests.crawling import PROJECT

PACKAGE = PROJECT / "crawler"
GETTERS = frozenset({"get", "getint", "getfloat", "getbool", "getlist", "getdict"})


def test_defaults_is_a_leaf_of_plain_constants() -> None:
    tree = ast.parse((PACKAGE / "config" / "defaults.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports == []
    assert defaults.__all__, "no defaults exported"
    for name in defaults.__all__:
        assert name.isupper()
        value = getattr(defaults, name)
        if isinstance(value, tuple):  # an immutable list setting
            assert all(isinstance(v, str) for v in value), name
        elif isinstance(value, dict):  # the expert table (TUNING): empty, its knobs elsewhere
            assert value == {}, name
        else:
            assert isinstance(value, (str, int, float, bool, type(None))), name


def test_the_shipped_settings_are_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``scrapy crawl`` loads from the project (scrapy.cfg at the root) has every default
    unchanged: settings.py takes them from crawler.config.defaults and overrides none."""
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


def _literal(node: ast.expr) -> bool:
    """A constant written in place: 3, -1.0, 4 * 1024, "depth", True (not a name or call)."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    return False


def literal_fallbacks(root: Path) -> list[str]:
    """``X.get*("NAME", <literal>)`` for every NAME that has a default in
    crawler.config.defaults."""
    names = set(defaults.__all__)
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in GETTERS
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in names
                and _literal(node.args[1])
            ):
                continue
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            found.append(f"{where}: {ast.unparse(node)}")
    return found


def test_no_getter_repeats_a_default() -> None:
    found = literal_fallbacks(PACKAGE)
    assert not found, "use crawler.config.defaults instead of:\n" + "\n".join(found)


def test_the_check_finds_a_literal_fallback(tmp_path: Path) -> None:
    (tmp_path / "crawler").mkdir()
    (tmp_path / "crawler" / "planted.py").write_text(
        "def f(s):\n"
        "    return s.getfloat('FRONTIER_MIN_DELAY', 1.0), s.getint('PAGE_MAX_HTML', 4 * 1024)\n"
        "def ok(s, d):\n"
        "    return s.getfloat('FRONTIER_MIN_DELAY', d.FRONTIER_MIN_DELAY), s.get('JOBDIR', 'x')\n"
    )
    found = literal_fallbacks(tmp_path / "crawler")
    assert [f.split(": ", 1)[0] for f in found] == ["crawler/planted.py:2", "crawler/planted.py:2"]

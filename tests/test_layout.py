"""The layout shows the architecture, and stays so: every module of ``crawler/`` sits in a layer
of ``.importlinter``, has a docstring that says its job, is at most 600 lines long (two
exceptions, named below with their one job), and no signal is used to ask for something.

``tests/test_layers.py`` shows that the contracts themselves would catch a forbidden import;
this file shows that no module escapes them.
"""

from __future__ import annotations

import ast
import configparser

from tests.crawling import PROJECT

PACKAGE = PROJECT / "crawler"
MAX_LINES = 600
# The two modules allowed past MAX_LINES, each with its one job (empty: none needs it).
LONG_MODULES: dict[str, str] = {}


def modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PROJECT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def layers() -> list[str]:
    config = configparser.ConfigParser()
    config.read(PROJECT / ".importlinter")
    listed = config["importlinter:contract:layers"]["layers"]
    return [
        name.strip()
        for line in listed.splitlines()
        for name in line.replace(":", "|").split("|")
        if name.strip()
    ]


def test_every_module_is_in_a_layer() -> None:
    listed = layers()
    outside = [
        m
        for m in modules()
        if m != "crawler" and not any(m == layer or m.startswith(layer + ".") for layer in listed)
    ]
    assert not outside, f"modules in no layer of .importlinter: {outside}"


def test_the_root_holds_only_the_project_files() -> None:
    """Scrapy's project files (settings, items) and the vocabulary every layer shares (signals,
    request meta keys); everything else lives in a package named after its layer and job."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "items.py", "meta.py", "settings.py", "signals.py"]


def test_every_module_says_its_job() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not ast.get_docstring(ast.parse(path.read_text())):
            missing.append(str(path.relative_to(PROJECT)))
    assert not missing, f"modules without a docstring: {missing}"


def test_modules_stay_short() -> None:
    long = {
        str(p.relative_to(PROJECT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert len(LONG_MODULES) <= 2
    assert set(long) <= set(LONG_MODULES), f"over {MAX_LINES} lines: {long}"


def _asking_sends(tree: ast.AST) -> list[int]:
    """Lines where the result of ``send_catch_log(...)`` is used: a signal used to ask."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("send_catch_log", "send_catch_log_deferred")
        ):
            parent = parents.get(node)
            if isinstance(parent, ast.Await):
                parent = parents.get(parent)
            if not isinstance(parent, ast.Expr):
                found.append(node.lineno)
    return found


def test_signals_notify_and_never_ask() -> None:
    asking = {
        str(p.relative_to(PROJECT)): lines
        for p in PACKAGE.rglob("*.py")
        if (lines := _asking_sends(ast.parse(p.read_text())))
    }
    assert not asking, f"a signal's answers are read at: {asking}"


def test_the_asking_check_would_see_an_answer_read() -> None:
    tree = ast.parse("answers = signals.send_catch_log(s)\nsignals.send_catch_log(s)")
    assert _asking_sends(tree) == [1]

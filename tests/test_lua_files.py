"""Server-side scripts stay small ``.lua`` files with every key declared (issue 37), and so
from now on: no Python module holds Lua source or hands Redis a script written in Python, and
no script builds a key name (proxies and managed clusters route a call by its declared keys;
redis-py's cluster client does too).
"""

from __future__ import annotations

import ast
import re

from tests.crawling import PROJECT

PACKAGE = PROJECT / "crawler"
LUA = PACKAGE / "backends" / "redis" / "lua"
# what only Lua source, or a script sent as Python text, contains
LUA_IN_PYTHON = re.compile(r"redis\.p?call\(|\.eval\(|\bfunction_load\(")
# calls that hand Redis a script's text: only a packaged ``.lua`` file's
SENDS_SCRIPT = {"register_script", "script_load"}


def python_modules() -> dict[str, str]:
    return {
        str(path.relative_to(PROJECT)): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def lua_loaded_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to the text of a packaged ``.lua`` file."""
    return {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(
            isinstance(c, ast.Constant) and str(c.value).endswith(".lua")
            for c in ast.walk(node.value)
        )
        and "read_text" in ast.unparse(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_no_python_module_holds_lua_or_sends_a_script_of_its_own() -> None:
    found = {path: LUA_IN_PYTHON.findall(text) for path, text in python_modules().items()}
    assert {path: hits for path, hits in found.items() if hits} == {}


def test_every_registered_script_is_a_packaged_lua_file() -> None:
    """``register_script`` and ``script_load`` are given a name bound to a ``.lua`` file's
    text, nothing else."""
    registered = {}
    for path, text in python_modules().items():
        tree = ast.parse(text)
        loaded = lua_loaded_names(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in SENDS_SCRIPT
            ):
                source = ast.unparse(node.args[0]) if node.args else ""
                # a registered Script's own text (``script.script``) when Redis lost it
                registered[f"{path}:{node.lineno}"] = source in loaded or source.endswith(
                    ".script"
                )
    assert registered and all(registered.values()), registered


def test_every_key_a_script_touches_is_declared() -> None:
    """Each ``redis.call`` of a script names its key as ``KEYS[...]``, or its keys as
    ``unpack(KEYS, ...)`` (a keyless command such as ``TIME`` has none); and each file says
    what its KEYS and ARGV are."""
    scripts = sorted(LUA.glob("*.lua"))
    assert scripts
    for path in scripts:
        text = path.read_text(encoding="utf-8")
        assert f"-- {path.name}:" in text and "-- KEYS[1]" in text, path.name
        code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
        aliases = key_aliases(code)
        for command, key in re.findall(r"redis\.p?call\(\s*([^,)]+)\s*(?:,\s*([^,)\n]+))?", code):
            if command.strip("'") in {"TIME"}:
                continue
            key = key.strip()
            declared = key.startswith(("KEYS[", "unpack(KEYS"))  # (a run of declared keys)
            assert declared or key in aliases, (
                f"{path.name}: redis.call({command}, {key} ...)"
            )


def key_aliases(code: str) -> set[str]:
    """Local names every assignment of which gives a ``KEYS[...]`` (``local a, b = KEYS[1],
    KEYS[2]``; ``a = KEYS[3]``): a key chosen among declared ones."""
    verdict: dict[str, bool] = {}
    for lhs, rhs in re.findall(r"(?:local\s+)?([\w\s,]+?)\s*=\s*([^=\n][^\n]*)", code):
        names = [n.strip().removeprefix("local").strip() for n in lhs.split(",")]
        values = [v.strip() for v in rhs.split(",")]
        for i, name in enumerate(names):
            value = values[i] if i < len(values) else ""
            ok = value.startswith("KEYS[")
            verdict[name] = verdict.get(name, True) and ok
    return {name for name, ok in verdict.items() if ok}


def test_the_frontiers_scripts_hold_at_most_150_lines() -> None:
    """Issue 37's bound on the frontier's server-side code (the near-duplicate store has
    none)."""
    lines = {
        path.name: len(path.read_text(encoding="utf-8").splitlines())
        for path in LUA.glob("*.lua")
    }
    assert lines and sum(lines.values()) <= 150, lines

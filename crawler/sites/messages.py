"""What a site config's refusals say: ``<file>: <key>: <problem>``, every problem of a file at
once, values shown as they are written in TOML.

The checks of single values (crawler/sites/sitefile.py, and the settings schema under them)
speak our words already; pydantic's structural errors (an unknown key, a missing one, a table
or list of the wrong type) are put into them here, with the likely intended key for a typo.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError


class SiteConfigError(ValueError):
    """A site config (or a seeds file) that cannot be used, as ``<file>: <key>: <problem>``.

    ``file``, ``key`` and ``problem`` are kept apart so callers (the spider loader, tests) can
    report or match them without parsing the message. ``key`` is a dotted path such as
    ``politeness.min_delay`` or ``urls.allow[2]``, or ``None`` when the whole file is at fault.
    A file with several problems raises one error for all of them: ``key`` and ``problem`` are
    the first, ``problems`` lists every ``(key, problem)``, and the message has one line each.
    """

    def __init__(
        self,
        file: str,
        key: str | None,
        problem: str,
        more: Iterable[tuple[str | None, str]] = (),
    ) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        self.problems: tuple[tuple[str | None, str], ...] = ((key, problem), *more)
        super().__init__(
            "\n".join(f"{file}: {k}: {p}" if k else f"{file}: {p}" for k, p in self.problems)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through ``args``; ours has more, so say how to rebuild it.
        return (type(self), (self.file, self.key, self.problem, self.problems[1:]))


class SeedsFileError(SiteConfigError):
    """A seeds file that is missing or unreadable; the message names the file."""


def fail(problem: str, key: str | None = None) -> PydanticCustomError:
    """The error a check raises: ``problem`` in our words; ``key``, when given, names the key
    below the one the check runs on."""
    context = {"problem": problem} if key is None else {"problem": problem, "key": key}
    return PydanticCustomError("site_config", "{problem}", context)


def fail_all(problems: Sequence[tuple[str, str]]) -> PydanticCustomError:
    """One error for several ``(key, problem)`` of one check, each reported on its own line."""
    return PydanticCustomError("site_config", "{problem}", {
        "problem": problems[0][1], "key": problems[0][0], "more": tuple(problems[1:]),
    })  # fmt: skip


def file_problems(
    exc: ValidationError, stem: str, tables: Mapping[str, tuple[str, ...]]
) -> list[tuple[str | None, str]]:
    """Every error of a file as ``(dotted key, problem)``, in our words; ``tables`` are the
    keys of each table of the schema (for "did you mean")."""
    out: list[tuple[str | None, str]] = []
    for error in exc.errors(include_url=False):
        context = error.get("ctx") or {}
        loc = [part for part in error["loc"] if part != "[key]"]  # a [settings] name's own error
        kind = error["type"]
        value = error.get("input")
        if kind == "site_config":
            first = (context.get("key"), context["problem"])
            for key, problem in (first, *context.get("more", ())):
                out.append((_dotted([*loc, key] if key else loc) or None, problem))
            continue
        key = _dotted(loc)
        if kind == "extra_forbidden":
            problem = "unknown key" + _suggest(tables, _dotted(loc[:-1]), str(loc[-1]))
        elif kind == "missing":
            problem = f'is required (name = "{stem}")' if key == "name" else "is required"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            problem = f"must be a table ([{key}]), got {show(value)}"
        elif kind in ("tuple_type", "list_type"):
            problem = f"must be a list of strings, got {show(value)}"
        else:  # a case the schema does not word itself: pydantic's own message
            problem = f"{error['msg']}, got {show(value)}"
        out.append((key or None, problem))
    return out


def _dotted(loc: Iterable[str | int]) -> str:
    """``("urls", "allow", 2)`` as ``urls.allow[2]``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _suggest(tables: Mapping[str, tuple[str, ...]], table: str, key: str) -> str:
    """The likely intended key for an unknown ``key`` in ``table`` (``""``: the top level)."""
    allowed = tables.get(table, ())
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f" (did you mean {close[0]}?)"
    # The classic TOML slip: a key meant for another table (or for the top level, written
    # after a [table] header, which makes it part of that table).
    for other, keys in tables.items():
        if other and other != table and key in keys:
            return f" (did you mean {other}.{key}, in the [{other}] table?)"
    if table and key in tables[""]:
        return f" (top-level keys such as {key} must come before the first [table] header)"
    return f" (known keys: {', '.join(allowed)})"


def show(value: object) -> str:
    """A value as the user wrote it in TOML (strings quoted, ``true``, ``nan``), cut short if
    long."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # nan, inf, -inf: TOML's words (JSON has none)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def display(source: object) -> str:
    """A file name for messages: relative to the current directory when it is below it."""
    text = str(source)
    if not os.path.isabs(text):
        return text
    try:
        rel = os.path.relpath(text)
    except ValueError:  # another drive on Windows
        return text
    return text if rel.startswith("..") else rel

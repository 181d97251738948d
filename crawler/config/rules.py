"""How one setting's value is read: the rules of the settings schema (crawler/config/schema.py)
and of the ``TUNING`` knobs (crawler/config/tuning.py), each raising
:class:`SettingValueError` with what the setting takes, in one line.

The bottom layer: free of Scrapy and of every other package of the crawler.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from email import policy
from typing import Any
from urllib.parse import urlsplit

Show = Callable[[object], str]

#: The FRONTIER_PRIORITY_POLICY words; ``breadth_first`` is read as its alias ``depth``.
PRIORITY_POLICIES = ("depth", "breadth_first", "fifo", "request", "opic")
BACKENDS = ("memory", "redis")
#: What a crawl may be for (CRAWL_PURPOSE; crawler/robots/usage.py enforces sites' preferences
#: by it).
PURPOSES = ("search", "archive", "ai-train", "ai-input")

class SettingValueError(ValueError):
    """A value that a setting cannot take; the message is the problem, without the name."""


class SettingsError(ValueError):
    """Settings that cannot be used: one ``NAME: problem`` line each, all of them at once."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


def _number_text(number: float) -> str:
    return f"{number:g}"


class Rule:
    """How one setting's value is read: :meth:`read` returns it in the setting's type or raises
    :class:`SettingValueError` saying what the setting takes."""

    def read(self, value: object, show: Show) -> Any:
        return value


@dataclass(frozen=True)
class Number(Rule):
    """A finite number (an integer with ``integer``), at least ``low`` (above it with
    ``above``) and at most ``high``; with ``blank``, empty text is None (the setting's "not
    set", as ``-s NAME=`` gives it)."""

    integer: bool = False
    low: float = 0
    above: bool = False
    high: float | None = None
    blank: bool = False

    @property
    def kind(self) -> str:
        return "an integer" if self.integer else "a number"

    @property
    def _lower(self) -> str:
        return f"{self.kind} {'>' if self.above else '>='} {self.low:g}"

    def read(self, value: object, show: Show) -> Any:
        if self.blank and isinstance(value, str) and not value.strip():
            return None
        number = self._parse(value)
        if number is None:
            raise SettingValueError(f"must be {self._lower}, got {show(value)}")
        if number < self.low or (self.above and number == self.low):
            raise SettingValueError(f"must be {self._lower}, got {_number_text(number)}")
        if self.high is not None and number > self.high:
            raise SettingValueError(
                f"must be {self.kind} <= {self.high:g}, got {_number_text(number)}"
            )
        return number

    def _parse(self, value: object) -> float | None:
        if isinstance(value, str):
            try:
                value = int(value) if self.integer else float(value)
            except ValueError:
                try:  # "1e3" or "2.0" for an integer, as TOML's 1e3 or 2.0 would be
                    value = float(value)
                except ValueError:
                    return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        if not self.integer:
            return float(value)
        if isinstance(value, float):
            return int(value) if value.is_integer() else None
        return value


@dataclass(frozen=True)
class Boolean(Rule):
    """``true``/``false``, ``1``/``0``, or their text in any case: what Scrapy's ``getbool``
    reads (``yes`` or ``on`` would pass here and stop the crawl there)."""

    _WORDS = {"true": True, "1": True, "false": False, "0": False}

    def read(self, value: object, show: Show) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in self._WORDS:
            return self._WORDS[value.strip().lower()]
        raise SettingValueError(f"must be true or false, got {show(value)}")


@dataclass(frozen=True)
class Choice(Rule):
    """One of ``words`` (any case, stored lower-case); an alias is stored as what it means."""

    words: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)

    def read(self, value: object, show: Show) -> Any:
        word = value.strip().lower() if isinstance(value, str) else None
        if word not in self.words:
            raise SettingValueError(f"must be one of {', '.join(self.words)}, got {show(value)}")
        return self.aliases.get(word, word)


@dataclass(frozen=True)
class StringList(Rule):
    """A list of strings, from a list or from the text Scrapy users write on a command line:
    a JSON list (``'["a", "b"]'``) or ``a,b``. Stored as a tuple, without blank entries."""

    def read(self, value: object, show: Show) -> Any:
        items = _list_from_text(value) if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise SettingValueError(
                f"must be a list of strings (a JSON list or a,b), got {show(value)}"
            )
        return tuple(item.strip() for item in items if item.strip())


@dataclass(frozen=True)
class Purposes(Rule):
    """One or more of :data:`PURPOSES` (``search``, ``"search,archive"``, a list), stored as a
    tuple, in order, without repeats."""

    def read(self, value: object, show: Show) -> Any:
        items = _list_from_text(value) if isinstance(value, str) else value
        if isinstance(items, list | tuple):
            words = [i.strip().lower() if isinstance(i, str) else None for i in items]
            if words and all(w in PURPOSES for w in words):
                return tuple(dict.fromkeys(words))
        raise SettingValueError(
            f"must be one or more of {', '.join(PURPOSES)} (a list or a,b), got {show(value)}"
        )


@dataclass(frozen=True)
class Mailbox(Rule):
    """One mailbox (RFC 9110 10.1.2's From: RFC 5322's ``mailbox``, ``ops@example.org`` or
    ``Crawl Ops <ops@example.org>``), or empty for none. A header value must never carry a line
    break (it would add header lines of its own) nor a list of addresses."""

    def read(self, value: object, show: Show) -> Any:
        if not isinstance(value, str):
            raise SettingValueError(f"must be a mailbox such as ops@example.org, got {show(value)}")
        text = value.strip()
        if not text:
            return ""
        if not text.isascii() or not text.isprintable():
            raise SettingValueError(
                f"must be one line of ASCII (a mailbox such as ops@example.org), got {show(value)}"
            )
        header = policy.strict.header_factory("From", text)
        addresses = header.addresses  # type: ignore[attr-defined]
        if header.defects or len(addresses) != 1 or not addresses[0].domain:
            raise SettingValueError(
                f"must be one mailbox such as ops@example.org, got {show(value)}"
            )
        return text


@dataclass(frozen=True)
class Origin(Rule):
    """An https origin (``https://crawler.example.org``: scheme, host, port), or empty for none;
    stored without a trailing "/". What Web Bot Auth's Signature-Agent of type ``directory``
    must be (draft-ietf-webbotauth-httpsig-protocol-00 5.5: the ASCII serialization of an
    origin, its key directory at that origin's well-known path)."""

    def read(self, value: object, show: Show) -> Any:
        text = value.strip() if isinstance(value, str) else None
        if text is None:
            raise SettingValueError(f"must be an https origin, got {show(value)}")
        if not text:
            return ""
        problem = _origin_problem(text)
        if problem:
            raise SettingValueError(f"{problem}, got {show(value)}")
        return text.rstrip("/")


def _origin_problem(text: str) -> str | None:
    example = "must be an https origin such as https://crawler.example.org"
    if not text.isascii() or not text.isprintable():
        return f"{example} (a host in its xn-- form)"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - read to have a malformed port refused
    except ValueError:
        return example
    if parts.scheme != "https" or not parts.hostname:
        return example
    if parts.username is not None or parts.password is not None:
        return f"{example}, without a user or password"
    if parts.path not in ("", "/") or parts.query or parts.fragment or text.endswith(("?", "#")):
        return f"{example}, without a path: the key directory is at its /.well-known/ path"
    return None


def _list_from_text(text: str) -> object:
    if text.lstrip().startswith("["):
        # A JSON list; text that only starts like one ("[::1]:443,10.0.0.0/8") is a,b.
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text.split(",")


def table_from(value: object) -> Mapping[Any, Any] | None:
    """A table setting's value (``TUNING``, ``BACKEND_CLASSES``): a mapping (a settings module,
    a site config's TOML table) or its JSON text (``-s``); None when it is neither."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, Mapping) else None


def closest(name: str, names: Iterable[str], what: str) -> str:
    """``did you mean X?`` for the closest of ``names``, else the list of them."""
    names = list(names)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else f"the {what}: {', '.join(names)}"


@dataclass(frozen=True)
class ClassTable(Rule):
    """A table of plug points (``keys``) to the dotted path of the class that fills each; an
    unknown plug point is refused with the closest. Stored as a dict."""

    keys: tuple[str, ...]

    def read(self, value: object, show: Show) -> Any:
        table = table_from(value)
        if table is None:
            raise SettingValueError(
                f'must be a table of classes such as {{"{self.keys[0]}": "package.Class"}}, '
                f"got {show(value)}"
            )
        out = {}
        for key, path in table.items():
            if str(key) not in self.keys:
                raise SettingValueError(
                    f"unknown plug point {key!r}; {closest(str(key), self.keys, 'plug points')}"
                )
            if not isinstance(path, str) or not path.strip():
                raise SettingValueError(f"{key} must be a dotted class path, got {show(path)}")
            out[str(key)] = path.strip()
        return out

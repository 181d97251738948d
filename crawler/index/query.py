"""The search query language, parsed once for every index backend.

``scrapy search`` takes one language whatever the engine behind it; each backend only renders
the tree :func:`parse_query` returns (FTS5 ``MATCH`` text for SQLite, ``to_tsquery`` text for
PostgreSQL), so both accept the same queries, mean the same by them and refuse the same
malformed ones with the same message.

The language (FTS5's operators, every word taken literally)::

    query   := or
    or      := and ("OR" and)*
    and     := not (["AND"] not)*         a bare space is AND
    not     := primary ("NOT" primary)*   binds tighter than AND, AND than OR
    primary := [field:] word[*] | [field:] "phrase" | [field:] ( query )
    field   := title | body | anchor      (any case)

* A word is anything between spaces, quotes and parentheses: ``e-mail``, ``it's``, ``a.b`` and
  ``foo:bar`` are words (the engine's tokenizer splits them as it splits the text). A trailing
  ``*`` makes it a prefix. A word with no letter or digit (``-``, ``&``) matches nothing and is
  dropped as if it were not there; so is a phrase without one.
* ``AND``, ``OR`` and ``NOT`` are operators only in capitals.
* ``title:``, ``body:`` or ``anchor:`` before a word, a phrase or a group searches that field
  only; a field written inside a group wins over the group's.
* A query with more than :data:`MAX_WORDS` words or more than :data:`MAX_NESTING` nested
  parentheses is refused, so that every query parsed here is one both engines can parse:
  FTS5's parser runs out of stack 13 groups deep (``a OR b c NOT (...)``, each level holding
  operators that wait for the group), PostgreSQL's a few thousand words deep (``to_tsquery``
  nests one level per operator).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from crawler.index.base import QuerySyntaxError

__all__ = [
    "FIELDS",
    "MAX_NESTING",
    "MAX_WORDS",
    "QUERY_HELP",
    "And",
    "Group",
    "Node",
    "Not",
    "Or",
    "Phrase",
    "Term",
    "cannot_parse",
    "parse_query",
    "searchable",
    "shown",
]

FIELDS = ("title", "body", "anchor")
MAX_WORDS = 1000
MAX_NESTING = 12
QUERY_HELP = (
    'write words (all must match), "exact phrases", OR / NOT between terms, ( ) to group, '
    "prefix* and title: / body: / anchor: to search one field"
)
_TOKEN = re.compile(r'"[^"]*"?|\(|\)|[^\s()"]+')
_WORD = re.compile(r"\w+")
_OPERATORS = frozenset({"AND", "OR", "NOT"})
_SHOWN = 200  # characters of a long query quoted back in an error message


@dataclass(frozen=True)
class Term:
    """A word as typed (punctuation and all); ``prefix``: written ``word*``."""

    text: str
    field: str = ""  # "" (every field) or one of FIELDS
    prefix: bool = False


@dataclass(frozen=True)
class Phrase:
    """The words between double quotes, in this order."""

    text: str
    field: str = ""


@dataclass(frozen=True)
class Group:
    """A parenthesized query, kept so a backend can write the parentheses back."""

    inner: Node


@dataclass(frozen=True)
class And:
    parts: tuple[Node, ...]  # two or more; none of them an And


@dataclass(frozen=True)
class Or:
    parts: tuple[Node, ...]  # two or more; none of them an Or


@dataclass(frozen=True)
class Not:
    """``positive NOT excluded[0] NOT excluded[1] ...``: each operand a leaf or a Group."""

    positive: Node
    excluded: tuple[Node, ...]


Node = Term | Phrase | Group | And | Or | Not


def shown(query: str) -> str:
    """The query as error messages quote it: ``repr``, cut when it is long."""
    if len(query) <= _SHOWN:
        return repr(query)
    return repr(query[:_SHOWN]) + f"... ({len(query)} characters)"


def parse_query(query: str) -> Node | None:
    """The tree of ``query``; ``None`` when it holds no word to search for.

    Raises :class:`QuerySyntaxError` with a message that quotes the query, says what is wrong
    and how to write it.
    """
    return _Parser(query).parse()


def searchable(query: str) -> Node:
    """The tree of a query to search for: as :func:`parse_query`, and a query without a word
    to search for is refused too."""
    node = parse_query(query)
    if node is None:
        raise QuerySyntaxError(f"the query {shown(query)} has no words to search for")
    return node


def cannot_parse(query: str, reason: object) -> QuerySyntaxError:
    """The error for a malformed query: what is wrong (``reason``) and how to write it; also
    for a query an engine refuses after all (past one of its own limits)."""
    return QuerySyntaxError(f"cannot parse the query {shown(query)} ({reason}): {QUERY_HELP}")


# A token of the query: ("leaf", Term | Phrase) | ("(", field) | (")", ")") | ("op", "AND"...)
_Item = tuple[str, object]


class _Parser:
    """Recursive descent over the query's tokens; a group passes its field to what it holds."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.items = self._tokens(query)
        self.pos = 0
        self.depth = 0

    def _tokens(self, query: str) -> list[_Item]:
        if "\x00" in query:
            self._fail("it holds a NUL character")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            self._fail("it is not valid Unicode text")
        items: list[_Item] = []
        words = 0
        field = ""  # "title" written right before a phrase or a group applies to all of it
        for token in _TOKEN.findall(query):
            if token.startswith('"'):
                if len(token) < 2 or not token.endswith('"'):
                    raise QuerySyntaxError(
                        f"unbalanced quote in the query {shown(query)}: {QUERY_HELP}"
                    )
                leaf: Term | Phrase = Phrase(token[1:-1], field)
            elif token == "(":
                items.append(("(", field))
                field = ""
                continue
            elif token == ")" or token in _OPERATORS:
                items.append(("op" if token in _OPERATORS else ")", token))
                field = ""  # a field right before ")" or an operator is dropped
                continue
            elif token.endswith(":") and token[:-1].lower() in FIELDS:
                field = token[:-1].lower()
                continue
            else:
                column, sep, rest = token.partition(":")
                own = field
                if sep and column.lower() in FIELDS and rest:
                    own, token = column.lower(), rest
                word = token.rstrip("*")
                if not _WORD.search(word):
                    continue  # lone punctuation: as if absent, a field before it still waits
                leaf = Term(word, own, token.endswith("*"))
            field = ""
            found = len(_WORD.findall(leaf.text))
            if found:
                items.append(("leaf", leaf))
                words += found
                if words > MAX_WORDS:
                    self._fail(f"more than {MAX_WORDS} words")
        if field:
            raise QuerySyntaxError(
                f"{field}: needs a word, a phrase or a group after it: {QUERY_HELP}"
            )
        return items

    def parse(self) -> Node | None:
        if not self.items:
            return None
        node = self._or("")
        if self.pos < len(self.items):
            self._fail(f"unexpected {self.items[self.pos][1]!r}")
        return node

    def _fail(self, reason: str) -> NoReturn:
        raise cannot_parse(self.query, reason)

    def _peek(self) -> _Item | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def _or(self, field: str) -> Node:
        parts = [self._and(field)]
        while self._peek() == ("op", "OR"):
            self.pos += 1
            parts.append(self._and(field))
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def _and(self, field: str) -> Node:
        parts = [self._not(field)]
        while (item := self._peek()) is not None and item[0] != ")" and item != ("op", "OR"):
            if item == ("op", "AND"):
                self.pos += 1
            parts.append(self._not(field))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def _not(self, field: str) -> Node:
        positive = self._primary(field)
        excluded = []
        while self._peek() == ("op", "NOT"):
            self.pos += 1
            excluded.append(self._primary(field))
        return Not(positive, tuple(excluded)) if excluded else positive

    def _primary(self, field: str) -> Node:
        item = self._peek()
        if item is None:
            self._fail("it ends where a word was expected")
        kind, value = item
        self.pos += 1
        if kind == "leaf":
            assert isinstance(value, Term | Phrase)
            if value.field or not field:
                return value
            if isinstance(value, Term):
                return Term(value.text, field, value.prefix)
            return Phrase(value.text, field)
        if kind == "(":
            assert isinstance(value, str)
            self.depth += 1
            if self.depth > MAX_NESTING:
                self._fail(f"more than {MAX_NESTING} nested parentheses")
            inner = self._or(value or field)
            closing = self._peek()
            if closing is None or closing[0] != ")":
                self._fail("a ( is never closed")
            self.pos += 1
            self.depth -= 1
            return Group(inner)
        self._fail(f"{value!r} where a word was expected")

"""Read the ``server_args=…`` dump in both of its shapes, and tell the SGLang version from its fields.

Up to 0.5.11 the dump is a dataclass ``repr`` (``ServerArgs(model_path='…', …)``), whose values are
Python reprs but whose whole is not a literal; 0.5.23 prints a dict ``repr`` that ``ast.literal_eval``
reads. Both are walked the same way here (split at top-level commas, respecting quotes and brackets),
so a value that is not a literal (an enum's ``<X.Y: 1>``) or a dump cut short by a line limit costs
one field, not the whole dump.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from importlib import resources
from typing import Any

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = set(_OPEN.values())


def _split_top_level(body: str) -> tuple[list[str], bool]:
    """Split at commas outside quotes/brackets. Returns (items, complete); ``complete`` is False when
    the text ended inside a string or bracket (a truncated dump), in which case the last item is cut."""
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch == "'" or ch == '"':
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:  # the closing bracket of the dump itself
                items.append(body[start:i])
                return items, True
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    return items, False


def _value(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parse_server_args(message: str) -> tuple[dict[str, Any], str] | None:
    """Parse a ``server_args=…`` log message. Returns (fields, shape) with shape ``dataclass`` or
    ``dict``, or None when the message is not a dump."""
    if not message.startswith("server_args="):
        return None
    rest = message[len("server_args="):].strip()
    if rest.startswith("{"):
        try:
            parsed = ast.literal_eval(rest)
            if isinstance(parsed, dict):
                return {str(k): v for k, v in parsed.items()}, "dict"
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
        items, complete = _split_top_level(rest[1:])
        fields: dict[str, Any] = {}
        for item in items if complete else items[:-1]:
            key, sep, value = item.partition(":")
            if sep:
                name = _value(key)
                if isinstance(name, str):
                    fields[name] = _value(value)
        return fields, "dict"
    paren = rest.find("(")
    if paren < 0:
        return None
    items, complete = _split_top_level(rest[paren + 1:])
    fields = {}
    for item in items if complete else items[:-1]:
        key, sep, value = item.partition("=")
        key = key.strip()
        if sep and key.isidentifier():
            fields[key] = _value(value)
    return fields, "dataclass"


@lru_cache(maxsize=1)
def known_field_sets() -> dict[str, frozenset[str]]:
    """The ServerArgs field names of each SGLang version we have facts for (package data)."""
    text = resources.files("deployctl.facts").joinpath("sglang-serverargs-fields.json").read_text()
    data = json.loads(text)
    return {version: frozenset(field[0] for field in entry["fields"]) for version, entry in data.items()}


def version_from_fields(names: frozenset[str] | set[str], shape: str) -> tuple[str | None, str]:
    """The version whose ServerArgs fields match the dump best, with the evidence in words.

    An exact field-set match names the version; otherwise the nearest known one is given with ``~``
    (e.g. 0.5.11 shows as ``~0.5.10``): the facts hold field lists for four versions only.
    """
    if not names:
        return None, ""
    best, best_score, exact = None, -1.0, False
    for version, known in known_field_sets().items():
        score = len(names & known) / len(names | known)
        if score > best_score:
            best, best_score, exact = version, score, names == known
    if best is None:
        return None, ""
    evidence = (f"{shape} dump with {len(names)} fields, "
                f"{'identical to' if exact else f'{best_score:.0%} like'} the ServerArgs of {best}")
    return (best if exact else f"~{best}"), evidence

"""Read the ``server_args=…`` dump in both of its shapes (the version its fields tell: version.py).

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
    """The ServerArgs field names of each sampled SGLang release (package data, read from the wheels)."""
    text = resources.files("deployctl.facts").joinpath("sglang-serverargs-fields.json").read_text()
    data = json.loads(text)
    return {version: frozenset(field[0] for field in entry["fields"]) for version, entry in data.items()}


def dump_is_complete(message: str) -> bool:
    """Whether the dump ends with its closing bracket (a cut dump lacks fields for no reason, so only
    a complete one says that a field does not exist)."""
    end = message.rstrip()[-1:]
    return end == (")" if "=ServerArgs(" in message[:40] else "}")

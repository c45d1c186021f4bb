"""How inventory layers combine: profile inheritance (``null`` removes) and policy overrides (deep merge)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def layered(layers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Later layers override earlier ones; ``None`` removes; an overridden key keeps its position."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
    return out


def deep_merge(base: Mapping[Any, Any], over: Mapping[Any, Any]) -> dict[Any, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out

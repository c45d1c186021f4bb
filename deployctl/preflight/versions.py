"""SGLang version numbers and ranges (``>=0.5.11,<0.5.23``), without a dependency on ``packaging``.

SGLang publishes plain releases plus ``.postN`` and ``rcN`` builds; that is all this orders:
``0.5.10rc1 < 0.5.10 < 0.5.10.post1 < 0.5.11``.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:[.-]?(a|b|rc)(\d+))?(?:[.-]?post(\d+))?(?:[.-]?dev(\d+))?(?:\+.*)?$")
_SPEC = re.compile(r"^(>=|<=|==|!=|>|<)\s*(\S+)$")


def parse_version(text: str) -> tuple:
    """A sortable key; raises ValueError on text that is not a version."""
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"not a version: {text!r}")
    release = tuple(int(p) for p in match.group(1).split("."))
    release += (0,) * (4 - len(release))
    pre = (["a", "b", "rc"].index(match.group(2)), int(match.group(3))) if match.group(2) else (3, 0)
    post = int(match.group(4)) if match.group(4) else -1
    dev = int(match.group(5)) if match.group(5) else 1 << 30
    return (release, pre, post, dev)


def in_range(version: str, spec: str | None) -> bool:
    """Whether ``version`` satisfies every comma-separated clause of ``spec`` (None/empty: always)."""
    if not spec:
        return True
    key = parse_version(version)
    for clause in spec.split(","):
        match = _SPEC.match(clause.strip())
        if not match:
            raise ValueError(f"not a version range: {spec!r}")
        op, bound = match.group(1), parse_version(match.group(2))
        ok = {
            ">=": key >= bound, "<=": key <= bound, "==": key == bound,
            "!=": key != bound, ">": key > bound, "<": key < bound,
        }[op]
        if not ok:
            return False
    return True


def validate_range(spec: str) -> None:
    """Raise ValueError if ``spec`` is not a valid range (used when loading the catalogue)."""
    in_range("0", spec)

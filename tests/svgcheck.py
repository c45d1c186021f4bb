"""Reading the report's inline SVG back: the points a chart drew, to check them against the ledger's numbers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

_SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_NS = "{http://www.w3.org/2000/svg}"


def svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(block) for block in _SVG.findall(html)]


def points(html: str, gid: str) -> list[tuple[float, float]]:
    """The (x, y) of every marker in the group matplotlib wrote for the artist with this gid."""
    for root in svgs(html):
        for g in root.iter(f"{_NS}g"):
            if g.get("id") == gid:
                return [(float(u.get("x")), float(u.get("y"))) for u in g.iter(f"{_NS}use")]
    raise AssertionError(f"no SVG group {gid!r} in the page")


def affine_residual(values: list[float], pixels: list[float]) -> tuple[float, float]:
    """Fit pixels = a·values + b by least squares; return (a, the largest residual in pixels)."""
    n = len(values)
    mv, mp = sum(values) / n, sum(pixels) / n
    var = sum((v - mv) ** 2 for v in values)
    a = sum((v - mv) * (p - mp) for v, p in zip(values, pixels)) / var
    b = mp - a * mv
    return a, max(abs(a * v + b - p) for v, p in zip(values, pixels))

"""Paths the tests share (a module of its own: ``conftest`` names are ambiguous across test folders)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"

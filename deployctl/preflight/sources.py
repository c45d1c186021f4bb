"""Read an SGLang package's Python source without importing it: from a directory or straight from a wheel.

Importing ``sglang`` imports torch (seconds, and a CUDA stack the controller may not have), so the flag
extractor only ever reads source text. A wheel is a zip, so tests can extract flags from a downloaded
wheel without unpacking or installing it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Protocol


class SourceTree(Protocol):
    """Source files below the directory that holds the ``sglang`` package (``site-packages``)."""

    def read(self, relpath: str) -> str | None:
        """The text of ``relpath`` (e.g. ``sglang/srt/server_args.py``), or None if absent."""
        ...

    def is_dir(self, relpath: str) -> bool: ...

    def describe(self) -> str: ...


class DirSource:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.read_paths: list[str] = []

    def read(self, relpath: str) -> str | None:
        path = self.root / relpath
        if not path.is_file():
            return None
        self.read_paths.append(relpath)
        return path.read_text(encoding="utf-8", errors="replace")

    def is_dir(self, relpath: str) -> bool:
        return (self.root / relpath).is_dir()

    def describe(self) -> str:
        return str(self.root)


class WheelSource:
    """Reads members of a wheel; remembers which it read (tests copy exactly those into a fake env)."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = Path(wheel)
        self._zip = zipfile.ZipFile(self.wheel)
        self._names = set(self._zip.namelist())
        self.read_paths: list[str] = []

    def read(self, relpath: str) -> str | None:
        if relpath not in self._names:
            return None
        self.read_paths.append(relpath)
        return self._zip.read(relpath).decode("utf-8", errors="replace")

    def is_dir(self, relpath: str) -> bool:
        prefix = relpath.rstrip("/") + "/"
        return any(n.startswith(prefix) for n in self._names)

    def describe(self) -> str:
        return str(self.wheel)

    def close(self) -> None:
        self._zip.close()

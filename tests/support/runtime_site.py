"""A site directory holding only deployctl's runtime dependencies, taken from the test environment.

The install tests put the built wheel into a fresh venv with ``pip --no-deps`` (they download nothing) and
give that venv its dependencies through a ``.pth`` naming this directory: links to exactly the files of
the distributions deployctl requires (recursively, markers evaluated), so pytest, ansible, build and the
rest of the test toolchain stay out of the production venv, as they would be on a host.
"""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from packaging.requirements import Requirement


def _closure(name: str) -> list[md.Distribution]:
    seen: dict[str, md.Distribution] = {}
    todo = [name]
    while todo:
        dist = md.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [d for k, d in seen.items() if k != name]


def runtime_site(dest: Path) -> Path:
    """Link every top-level file or package of deployctl's runtime dependencies into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in _closure("deployctl"):
        for file in dist.files or ():
            top = file.parts[0]
            if top == ".." or (dest / top).exists():  # a script in bin/, or already linked
                continue
            (dest / top).symlink_to(Path(str(dist.locate_file(top))))
    return dest

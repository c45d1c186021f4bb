"""Run this test environment's Python as ``nobody``, wherever the checkout and the interpreter live.

A clone inside a 0700 directory (``mktemp -d``, ``/root``), or an interpreter under ``/root/.pyenv``, is
out of nobody's reach: ``setpriv … python -m deployctl`` then fails with "No module named deployctl" (or
cannot start at all), which is not what a not-root test means to check. Here root opens each directory
the child needs and the child inherits the descriptors: it reaches them as ``/proc/self/fd/N``, which
skips the permission check of their parents (the directories themselves and their files keep theirs).
Nothing on the host changes mode.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import deployctl

NOBODY = 65534  # nobody:nogroup on Debian


class AsNobody:
    """``with AsNobody(tmp_path) as nobody: nobody.python("-m", "deployctl", …, nobody.path(file))``."""

    def __init__(self, *shared: Path) -> None:
        home = Path(sys.base_prefix)
        self._exe = Path(os.path.realpath(sys.executable)).relative_to(home)
        code = Path(deployctl.__file__).resolve().parent.parent  # the checkout (editable) or site-packages
        self._dirs = [home, code, *(Path(p) for p in site.getsitepackages()), *shared]
        self._fds: list[int] = []

    def __enter__(self) -> AsNobody:
        self._fds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in self._dirs]
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        for fd in self._fds:
            os.close(fd)

    def path(self, path: Path | str) -> str:
        """``path`` as the child reaches it: through the descriptor of the shared directory it is under."""
        path = Path(path).resolve()
        for directory, fd in zip(self._dirs, self._fds):
            if path.is_relative_to(directory.resolve()):
                return f"/proc/self/fd/{fd}/{path.relative_to(directory.resolve())}"
        raise ValueError(f"{path} is under no shared directory ({', '.join(map(str, self._dirs))})")

    def python(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """This interpreter, with deployctl and its dependencies importable, as nobody:nogroup in ``/``."""
        home, code, *rest = (f"/proc/self/fd/{fd}" for fd in self._fds)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "PYTHONHOME": home,
               "PYTHONPATH": ":".join([code, *rest[: len(site.getsitepackages())]]),
               "LD_LIBRARY_PATH": f"{home}/lib"}  # a libpython next to the interpreter (pyenv builds)
        return subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", f"{home}/{self._exe}", *args],
            capture_output=True, text=True, timeout=timeout, cwd="/", env=env, pass_fds=self._fds,
        )

"""Where the ledger lives: the state directory (``--state-dir``, ``$DEPLOYCTL_STATE_DIR``, default
``/var/lib/deployctl``) next to the locks, because the evidence belongs where the GPUs are; private to its owner.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Mapping

DEFAULT_STATE_DIR = Path("/var/lib/deployctl")
LEDGER_FILE = "ledger.sqlite3"
MEMORY = Path(":memory:")  # SQLite's name for a database in memory


def resolve_state_dir(arg: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    if arg:
        return Path(arg)
    if env.get("DEPLOYCTL_STATE_DIR"):
        return Path(env["DEPLOYCTL_STATE_DIR"])
    return DEFAULT_STATE_DIR


def private_files(path: Path) -> None:
    """The state directory 0700, the ledger and its WAL/SHM files 0600 (SQLite gives the WAL and SHM
    files the database file's mode); an older, looser state directory or ledger is tightened here.
    A directory deployctl does not own, or a shared sticky one such as /tmp, is left as it is."""
    state_dir = path.parent
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = state_dir.stat()
    if st.st_uid == os.geteuid() and not st.st_mode & stat.S_ISVTX and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(state_dir, stat.S_IMODE(st.st_mode) & 0o700)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        try:
            os.chmod(path.parent / name, 0o600)
        except FileNotFoundError:
            pass

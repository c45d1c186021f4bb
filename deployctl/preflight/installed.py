"""Which SGLang a deployment's interpreter would run, found without importing sglang.

``import sglang`` imports torch (0.5.23: from ``sglang/__init__.py`` itself), which takes seconds and
needs the CUDA stack. The interpreter is asked only for package metadata
(``importlib.metadata.version``) and where the package lives (``importlib.util.find_spec`` of a
top-level name locates it without executing it); the flags are then read from that source directory.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from deployctl.errors import InputError

_PROBE = r"""
import importlib.metadata as md, importlib.util, json, sys, sysconfig
out = {"python_version": list(sys.version_info[:3]), "purelib": sysconfig.get_paths()["purelib"],
       "version": None, "package_dir": None}
try:
    out["version"] = md.version("sglang")
except md.PackageNotFoundError:
    pass
try:
    spec = importlib.util.find_spec("sglang")
except (ImportError, ValueError):
    spec = None
if spec is not None and spec.submodule_search_locations:
    out["package_dir"] = list(spec.submodule_search_locations)[0]
print(json.dumps(out))
"""

# What the unit's environment may change about where Python finds sglang.
_PATH_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


@dataclass(frozen=True)
class InstalledSglang:
    python: str
    python_version: tuple[int, int, int]
    sglang_version: str | None  # None: not installed for this interpreter
    source_root: Path | None  # the directory holding the ``sglang`` package (site-packages)


def probe_interpreter(python: str, env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> InstalledSglang:
    """Ask ``python`` for its SGLang version and location. Raises :class:`InputError` if it cannot run."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    for name in _PATH_VARIABLES:
        if env and name in env:
            child_env[name] = env[name]
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s,
                              env=child_env, check=False)
    except FileNotFoundError:
        raise InputError(f"the deployment's interpreter {python} does not exist",
                         hint="fix hosts.<host>.python in the inventory") from None
    except PermissionError:
        raise InputError(f"the deployment's interpreter {python} is not executable") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{python} did not answer within {timeout_s:g}s while reading package metadata") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InputError(f"{python} failed to report its packages: {tail[0]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    root: Path | None = None
    if data["package_dir"]:
        root = Path(data["package_dir"]).parent
    elif data["version"] and (Path(data["purelib"]) / "sglang").is_dir():
        root = Path(data["purelib"])
    major, minor, micro = data["python_version"]
    return InstalledSglang(python, (major, minor, micro), data["version"], root)

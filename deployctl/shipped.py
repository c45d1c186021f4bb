"""Files the package carries beside its code, found the same way in a checkout, a wheel and a pipx venv.

``deployctl/share/`` holds the example inventories (``inventory/example.yaml``, ``inventory/demo.yaml``)
and the example systemd units and polkit rule (``systemd/``); in the checkout they are links to the
top-level ``inventory/`` and ``systemd/`` that operators read, and the wheel carries copies.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

__all__ = ["shipped"]


def shipped(relative: str) -> Path:
    """``deployctl/share/RELATIVE`` of this installation, e.g. ``shipped("inventory/demo.yaml")``."""
    path = Path(str(importlib.resources.files("deployctl") / "share" / relative))
    if not path.exists():  # a broken install, not the operator's input: say what is missing and where
        raise FileNotFoundError(f"{path}: missing from this deployctl installation (reinstall it: scripts/install)")
    return path

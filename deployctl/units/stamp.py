"""A unit's identity: its ``X-Deployctl-*`` stamp and its hash, one rule each.

A rendered unit carries ``X-Deployctl-Deployment/Profile/Hash`` in ``[Unit]``. Its hash is the SHA-256 of
the unit text with the ``X-Deployctl-Hash=`` value blanked, so the hash can be written into the unit it
identifies; a unit without that line hashes as its plain text. The same ``unit_hash`` names a unit in the
stamp, in ``status``, in the ledger and in ``history``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

PREFIX = "X-Deployctl-"
_HASH_LINE = re.compile(r"^(X-Deployctl-Hash=).*$", re.MULTILINE)


@dataclass(frozen=True)
class UnitStamp:
    """What an installed unit says about itself."""

    deployment: str
    profile: str
    sha256: str
    intact: bool  # False: edited by hand since deployctl rendered it


def unit_hash(text: str) -> str:
    """SHA-256 of a unit with its ``X-Deployctl-Hash=`` value blanked (hex)."""
    return hashlib.sha256(_HASH_LINE.sub(r"\1", text, count=1).encode("utf-8")).hexdigest()


def with_hash(text: str) -> tuple[str, str]:
    """The unit with its ``X-Deployctl-Hash=`` value filled in, and that hash."""
    digest = unit_hash(text)
    return _HASH_LINE.sub(lambda m: m.group(1) + digest, text, count=1), digest


def stamp_keys(text: str) -> dict[str, str]:
    """The ``X-Deployctl-*`` keys of the ``[Unit]`` section, without the prefix: ``{"Deployment": "glm5", …}``."""
    keys: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Unit" and line.startswith(PREFIX) and "=" in line:
            key, _, value = line.partition("=")
            keys[key[len(PREFIX):].strip()] = value.strip()
    return keys


def read_stamp(text: str) -> UnitStamp | None:
    """The ``X-Deployctl-*`` stamp of a unit file, or None when deployctl did not write it."""
    found = stamp_keys(text)
    if not {"Deployment", "Profile", "Hash"} <= found.keys():
        return None
    return UnitStamp(
        deployment=found["Deployment"],
        profile=found["Profile"],
        sha256=found["Hash"],
        intact=found["Hash"] == unit_hash(text),
    )

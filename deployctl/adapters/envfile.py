"""A unit's EnvironmentFile, read as systemd reads it (systemd.exec(5), ``EnvironmentFile=``): one
``NAME=value`` per line, ``#`` and ``;`` comment lines, a value optionally in single or double quotes.

deployctl reads it for one reason: a server started with ``--api-key ${NAME}`` takes the key from this
root-only file, and the benchmark's clients must send the same key. The value is never logged or kept.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from deployctl.errors import EnvironmentUnfit


def parse_environment_file(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        name, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = shlex.split(value)[0] if value[0] == "'" else value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        values[name.strip()] = value
    return values


def environment_value(path: str | Path, name: str) -> str:
    """``name``'s value in the EnvironmentFile ``path``; a clear error when the file or the name is missing."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise EnvironmentUnfit(
            f"cannot read the environment file {path} for {name}: {exc.strerror}",
            hint="the benchmark sends the server's API key from that file: run as root (it is root-only)",
        ) from exc
    values = parse_environment_file(text)
    if name not in values:
        raise EnvironmentUnfit(f"the environment file {path} does not set {name}",
                               hint=f"add a line {name}=… to {path} (the server's --api-key reads it)")
    return values[name]

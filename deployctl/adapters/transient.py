"""What a transient unit is made of, as ``systemd-run`` would send it: names, properties with their D-Bus types.

Pure values (no bus here), so the properties are tested on data; ``Systemd.start_transient`` sends them.
Types are systemd 252's (``src/shared/bus-unit-util.c``): ``ExecStart`` is ``a(sasb)`` (path, argv with
argv0, ignore-failure), never ``a(sbas)``; ``XSec=`` settings travel as ``XUSec`` in microseconds.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

# (name, D-Bus signature, value): what StartTransientUnit's a(sv) carries, before wrapping in Variants.
Property = tuple[str, str, Any]

RM = "/bin/rm"  # coreutils; /usr/bin/rm too on a merged /usr
# What a unit name may hold (systemd.unit(5)); "-" too: these are not template or path units.
_UNIT_SAFE = set(string.ascii_letters + string.digits + ":_.-")


def escape_unit_part(text: str) -> str:
    """One part of a unit name: anything a unit name may not hold becomes ``\\xNN``, as systemd-escape writes it."""
    if not text:
        raise ValueError("an empty name cannot be part of a unit name")
    out = []
    for i, ch in enumerate(text):
        if ch in _UNIT_SAFE and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    return "".join(out)


def operation_unit(verb: str, deployment: str) -> str:
    """``deployctl-promote-glm5.service``: one fixed name per verb and deployment, so two cannot run at once."""
    if not re.fullmatch(r"[a-z]+", verb):
        raise ValueError(f"not a verb: {verb!r}")
    return f"deployctl-{verb}-{escape_unit_part(deployment)}.service"


def dead_man_units(deployment: str) -> tuple[str, str]:
    """The dead-man's switch of one deployment: (timer, the service it starts)."""
    stem = f"deployctl-deadman-{escape_unit_part(deployment)}"
    return f"{stem}.timer", f"{stem}.service"


@dataclass(frozen=True)
class TransientService:
    """A command for PID 1 to own: it outlives whoever started it, its stdio goes to the journal."""

    argv: Sequence[str]
    description: str
    environment: Mapping[str, str] = field(default_factory=dict)
    working_directory: str = "/"
    stop_timeout_s: float = 90.0
    # A directory the unit owns: removed when it stops, however it ended (a SIGKILLed program runs no cleanup).
    remove_after: str | None = None

    def properties(self) -> list[Property]:
        if not self.argv or not self.argv[0].startswith("/"):
            raise ValueError(f"a transient unit needs an absolute program path, not {self.argv[:1]!r}")
        for key, value in self.environment.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or "\n" in value:
                raise ValueError(f"not an environment assignment: {key!r}")
        removal = [] if self.remove_after is None else [
            ("ExecStopPost", "a(sasb)", [(RM, ["rm", "-rf", "--", self.remove_after], True)])]
        return [
            ("Description", "s", self.description),
            # exec: the start job is done once the program runs; the caller then follows its journal.
            ("Type", "s", "exec"),
            ("ExecStart", "a(sasb)", [(self.argv[0], list(self.argv), False)]),
            ("Environment", "as", [f"{k}={v}" for k, v in sorted(self.environment.items())]),
            ("WorkingDirectory", "s", self.working_directory),
            # Journal, never the caller's fds: a dropped SSH session must not take the operation's stdio
            # with it (NixOS #462179: `systemd-run --pipe` failed the switch when the session closed).
            # StandardError stays "inherit": one stream, so stdout and stderr lines keep their order.
            ("StandardInput", "s", "null"),
            ("StandardOutput", "s", "journal"),
            ("SyslogIdentifier", "s", "deployctl"),
            # `systemd-run --collect`: a failed run does not block the name for the next one.
            ("CollectMode", "s", "inactive-or-failed"),
            # SIGTERM is deployctl's abort (roll back); give the rollback time before SIGKILL.
            ("TimeoutStopUSec", "t", int(self.stop_timeout_s * 1_000_000)),
            *removal,
        ]


def timer_properties(description: str, on_active_s: float, *, every_s: float | None = None) -> list[Property]:
    """``systemd-run --on-active=S [--on-unit-active=E]``: a monotonic timer that fires S seconds after it is
    started, then (with ``every_s``) E seconds after each start of its service, until stopped."""
    if on_active_s <= 0 or (every_s is not None and every_s <= 0):
        raise ValueError(f"a timer's delays must be positive, not {on_active_s}, {every_s}")
    usec = [("OnActiveSec", int(on_active_s * 1_000_000))]
    if every_s is not None:
        usec.append(("OnUnitActiveSec", int(every_s * 1_000_000)))
    return [
        ("Description", "s", description),
        ("TimersMonotonic", "a(st)", usec),
        # systemd's default AccuracySec=1min lets the timer fire up to a minute late (coalesced with
        # other wake-ups): the switch promises the known-good unit back S seconds after the arm, so 1 s.
        ("AccuracyUSec", "t", 1_000_000),
        ("RemainAfterElapse", "b", False),
        ("CollectMode", "s", "inactive-or-failed"),
    ]

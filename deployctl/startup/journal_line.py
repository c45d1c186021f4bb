"""One line of a unit's journal, as the core reads it (the journal adapter decodes it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


@dataclass(frozen=True)
class JournalLine:
    ts: float  # wall-clock seconds (the journal's __REALTIME_TIMESTAMP)
    text: str  # decoded with errors="replace"; \r and ANSI escapes kept
    from_manager: bool = False  # PID 1's own message about the unit, not the service's output

    @property
    def display(self) -> str:
        """What a terminal would show: the last ``\\r`` frame, colours removed."""
        frames = [f for f in _ANSI.sub("", self.text).split("\r") if f.strip()]
        return frames[-1].rstrip() if frames else ""

"""The ledger's ``events``: the intent of each action before it runs and its outcome after, in order; the
canary's and the output gate's notes."""

from __future__ import annotations

from typing import Any, Mapping

from deployctl.adapters.ledger.store import Store, dumps, loads
from deployctl.facts.secrets import redact
from deployctl.decisions.records import Event


class Events(Store):
    def record(self, release_id: int, phase: str, kind: str, name: str, detail: Mapping[str, Any] | None = None) -> None:
        self._write(
            "INSERT INTO events (release_id, at, phase, kind, name, detail_json) VALUES (?,?,?,?,?,?)",
            (release_id, self._clock(), phase, kind, name, dumps(redact(dict(detail or {})))),
        )

    def events(self, release_id: int) -> list[Event]:
        rows = self._rows("SELECT * FROM events WHERE release_id=? ORDER BY id", (release_id,))
        return [Event(r["at"], r["phase"], r["kind"], r["name"], loads(r["detail_json"]) or {}) for r in rows]

    def stored_outputs(self, key: str, *, max_age_s: float, name: str = "outputs-reference"
                       ) -> tuple[int, dict[str, Any]] | None:
        """The newest reference outputs of the output gate stored under ``key`` within ``max_age_s``:
        (the release that measured them, their detail)."""
        row = self._row(
            "SELECT release_id, detail_json FROM events WHERE kind='evidence' AND name=?"
            " AND json_extract(detail_json, '$.scope')=? AND at>=? ORDER BY id DESC LIMIT 1",
            (name, key, self._clock() - max_age_s))
        return (row["release_id"], loads(row["detail_json"])) if row else None

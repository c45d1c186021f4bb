"""The ledger's ``releases``: one row per promote / rollback / adoption of the installed unit, and who asked."""

from __future__ import annotations

import sqlite3
from typing import Any, Mapping

from deployctl.adapters.ledger.store import Store, dumps, ledger_error, loads
from deployctl.errors import InputError
from deployctl.facts.secrets import redact, redact_mapping, redact_text
from deployctl.decisions.records import Release
from deployctl.startup.parser import StartupReport


def who_from_env(env: Mapping[str, str], interactive: bool) -> str:
    """Who asked, as an operator reads it: the sudo user, the SSH user and address, or a scheduled job."""
    user = env.get("USER") or env.get("LOGNAME") or "root"
    if env.get("SUDO_USER"):
        return f"{env['SUDO_USER']} (sudo)"
    if env.get("SSH_CONNECTION"):
        return f"{user} (ssh from {env['SSH_CONNECTION'].split()[0]})"
    if not interactive and not env.get("TERM"):
        return f"{user} (cron or another non-interactive job)"
    return user


class Releases(Store):
    def begin_release(
        self,
        *,
        deployment: str,
        kind: str,
        unit_name: str,
        unit_text: str,
        unit_hash: str,
        who: str,
        profile: str | None = None,
        flags: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        host: str | None = None,
        pid: int | None = None,
        previous_id: int | None = None,
        finished: bool = False,
        live: bool = False,
        result: str | None = None,
    ) -> int:
        safe_text = redact_text(unit_text)
        now = self._clock()
        release_id = self._write(
            "INSERT INTO releases (deployment, kind, profile, unit_name, unit_text, unit_hash, redacted, flags_json,"
            " env_json, host, who, pid, started_at, finished_at, previous_id, result)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                deployment, kind, profile, unit_name, safe_text, unit_hash, int(safe_text != unit_text),
                dumps(redact_mapping(flags or {})), dumps(redact_mapping(env or {})), host, who, pid, now,
                now if finished else None, previous_id, result,
            ),
        )
        if live:
            self.mark_live(release_id)
        return release_id

    def save_state(self, release_id: int, state: Mapping[str, Any]) -> None:
        self._write(
            "UPDATE releases SET phase=?, state_json=? WHERE id=?", (state.get("phase"), dumps(redact(state)), release_id)
        )

    def save_startup(self, release_id: int, role: str, report: StartupReport | None) -> None:
        column = {"baseline": "baseline_startup_json", "candidate": "startup_json"}[role]
        self._write(f"UPDATE releases SET {column}=? WHERE id=?",
                    (dumps(redact(report.to_dict()) if report is not None else None), release_id))

    def finish(self, release_id: int, *, result: str, verdict: str | None, reasons: list[str] | tuple[str, ...]) -> None:
        self._write(
            "UPDATE releases SET finished_at=?, result=?, verdict=?, reasons_json=? WHERE id=?",
            (self._clock(), result, verdict, dumps(redact(list(reasons))), release_id),
        )

    def mark_live(self, release_id: int) -> None:
        """``release_id``'s unit is the one installed now (kept, rolled back to, or adopted)."""
        deployment = self.get(release_id).deployment
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("UPDATE releases SET live=0 WHERE deployment=?", (deployment,))
                self._db.execute("UPDATE releases SET live=1 WHERE id=?", (release_id,))
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise ledger_error(self.path, "refused a write", exc) from exc

    def get(self, release_id: int) -> Release:
        row = self._row("SELECT * FROM releases WHERE id=?", (release_id,))
        if row is None:
            raise InputError(f"no release {release_id} in the ledger {self.path}", hint="see `deployctl history`")
        return release_row(row)

    def history(self, deployment: str | None = None, limit: int = 20) -> list[Release]:
        if deployment:
            rows = self._rows(
                "SELECT * FROM releases WHERE deployment=? ORDER BY id DESC LIMIT ?", (deployment, limit)
            )
        else:
            rows = self._rows("SELECT * FROM releases ORDER BY id DESC LIMIT ?", (limit,))
        return [release_row(r) for r in rows]

    def unfinished(self, deployment: str) -> list[Release]:
        rows = self._rows(
            "SELECT * FROM releases WHERE deployment=? AND finished_at IS NULL ORDER BY id", (deployment,)
        )
        return [release_row(r) for r in rows]

    def live_release(self, deployment: str) -> Release | None:
        row = self._row(
            "SELECT * FROM releases WHERE deployment=? AND live=1 ORDER BY id DESC LIMIT 1", (deployment,))
        return release_row(row) if row else None

    def release_with_hash(self, deployment: str, unit_hash: str) -> Release | None:
        row = self._row(
            "SELECT * FROM releases WHERE deployment=? AND unit_hash=? ORDER BY live DESC, id DESC LIMIT 1",
            (deployment, unit_hash))
        return release_row(row) if row else None


def release_row(row: sqlite3.Row) -> Release:
    return Release(
        id=row["id"], deployment=row["deployment"], kind=row["kind"], profile=row["profile"],
        unit_name=row["unit_name"], unit_text=row["unit_text"], unit_hash=row["unit_hash"],
        redacted=bool(row["redacted"]), flags=loads(row["flags_json"]) or {}, env=loads(row["env_json"]) or {},
        host=row["host"], who=row["who"], pid=row["pid"], started_at=row["started_at"],
        finished_at=row["finished_at"], phase=row["phase"], state=loads(row["state_json"]),
        previous_id=row["previous_id"], baseline_startup=loads(row["baseline_startup_json"]),
        startup=loads(row["startup_json"]), verdict=row["verdict"], reasons=loads(row["reasons_json"]) or [],
        result=row["result"], live=bool(row["live"]),
    )

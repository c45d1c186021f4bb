"""What the ledger keeps of a release, as read back: the rows the reports and recovery work from.

The ledger adapter writes and reads them; these are the plain values it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deployctl.bench.result import BenchResult
from deployctl.judge.reuse import BaselineFingerprint

if TYPE_CHECKING:  # an annotation only: the judge's noise planning (scipy) is no part of reading the ledger
    from deployctl.judge.noise import PairSource


@dataclass(frozen=True)
class Release:
    id: int
    deployment: str
    kind: str
    profile: str | None
    unit_name: str
    unit_text: str
    unit_hash: str
    redacted: bool
    flags: dict[str, Any]
    env: dict[str, str]
    host: str | None
    who: str
    pid: int | None
    started_at: float
    finished_at: float | None
    phase: str | None
    state: dict[str, Any] | None
    previous_id: int | None
    baseline_startup: dict[str, Any] | None
    startup: dict[str, Any] | None
    verdict: str | None
    reasons: list[str]
    result: str | None
    live: bool

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Event:
    at: float
    phase: str
    kind: str
    name: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class StoredBench:
    release_id: int
    role: str
    at: float
    unit_hash: str
    host: str | None
    sglang_version: str | None
    bench_key: str
    result: dict[str, Any]  # as stored (``show --json`` prints it as is)
    fingerprint: BaselineFingerprint | None = None  # a baseline's, when stored (ledger version 2 on)
    reused_from: int | None = None  # a reused baseline: the release whose measurement it extends
    id: int | None = None  # the ledger's row (a canary watch names its own and its reference's)

    @property
    def bench(self) -> BenchResult:
        return BenchResult.from_dict(self.result)

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["fingerprint"] = self.fingerprint.to_dict() if self.fingerprint else None
        return data


@dataclass(frozen=True)
class StoredRestartPair:
    """One unit measured on two server starts, as the ledger holds it (``Ledger.restart_pairs``)."""

    before: StoredBench
    after: StoredBench
    source: PairSource  # what measured ``after``

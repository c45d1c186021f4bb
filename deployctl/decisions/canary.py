"""What a canary run may do (pure): is it inside the maintenance window, is the pending candidate
worth a promote — different from the live unit, and this exact unit on this SGLang version not judged yet —
and, for a degraded live release under ``on_degraded: rollback``, which earlier release to try, if any?

A rejected or inconclusive candidate is not tried again until its rendered unit (hash) or the server's
version changes, so a timer never retries a known-bad candidate every few hours. The version is the one
a stored baseline is keyed on (``deployctl.decisions.evidence.version_key``: as the server states it, else
the startup log's version or range); where nothing states one it is ``UNKNOWN_VERSION``, which matches
itself, so a server that never says its version does not get the same candidate every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time
from typing import Any, Iterable, Mapping

from deployctl.decisions.records import Release

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
UNKNOWN_VERSION = "unknown"


@dataclass(frozen=True)
class Judged:
    """A finished promote in the ledger: which unit, on which SGLang version, and how it ended."""

    release_id: int
    unit_hash: str
    sglang_version: str  # the version identity it was judged on (UNKNOWN_VERSION when nothing said)
    result: str


@dataclass(frozen=True)
class ServerStart:
    """One start of a unit as systemd states it: its InvocationID and its ActiveEnterTimestamp (epoch s)."""

    invocation_id: str
    active_since: float


@dataclass(frozen=True)
class WatchStart:
    """Which start a synthetic watch measured, and its reference's row and measurement time: a reference
    measured on an earlier start of the same unit makes (reference, watch) a restart pair
    (``deployctl.judge.noise.restart_pair``), stored with the watch's note for ``Ledger.restart_pairs``."""

    start: ServerStart | None  # None: systemd named no active invocation
    bench_id: int  # the watch's benchmark row
    reference_id: int | None  # the reference's row; None: no reference yet
    reference_at: float | None  # when the reference was measured (the ledger's clock: wall time)
    reference_start: ServerStart | None = None  # its start, where a canary note says (a watch, a rebaseline)

    @property
    def restart_between(self) -> bool | None:
        """Was the reference measured on an earlier start? None: unknown. Its noted start decides where
        there is one (another invocation: a restart came between). Else its time: a row is stamped once
        its measurement ended, so a stamp before this start's ActiveEnterTimestamp is an earlier start's.
        Never a false pair: a later stamp (a pinned copy of an older baseline) only reads as "this start"."""
        if self.start is None or self.reference_id is None:
            return None
        if self.reference_start is not None:
            return self.reference_start.invocation_id != self.start.invocation_id
        if self.reference_at is None:
            return None
        return self.reference_at < self.start.active_since

    def to_dict(self) -> dict[str, Any]:
        return {"start": vars(self.start) if self.start else None, "bench_id": self.bench_id,
                "reference_id": self.reference_id, "reference_at": self.reference_at,
                "reference_start": vars(self.reference_start) if self.reference_start else None,
                "restart_between": self.restart_between}


@dataclass(frozen=True)
class TryDecision:
    attempt: bool
    reason: str


def in_window(window: str | None, now: datetime) -> bool:
    """``window`` as the policy writes it ("02:00-05:00", "Sat,Sun 01:00-06:00"); None is always.

    A window that ends before it starts runs over midnight (it then belongs to the day it started)."""
    if window is None:
        return True
    days_part, _, span = window.rpartition(" ")
    start_s, end_s = span.split("-")
    start, end = time.fromisoformat(start_s), time.fromisoformat(end_s)
    days = set(days_part.split(",")) if days_part else set(DAYS)
    t, today, yesterday = now.time(), DAYS[now.weekday()], DAYS[(now.weekday() - 1) % 7]
    if start <= end:
        return today in days and start <= t < end
    return (today in days and t >= start) or (yesterday in days and t < end)


def version_identity(*candidates: str | None) -> str:
    """The first version that something stated, else ``UNKNOWN_VERSION``: never None."""
    return next((v for v in candidates if v), UNKNOWN_VERSION)


def decide_try(profile: str | None, candidate_hash: str | None, live_hash: str | None, sglang_version: str,
               judged: Iterable[Judged], *, window: str | None, now: datetime) -> TryDecision:
    if profile is None:
        return TryDecision(False, "no pending candidate (policy.canary.profile is not set)")
    if candidate_hash == live_hash:
        return TryDecision(False, f"the candidate {profile} is the live unit: nothing to try")
    earlier = next((j for j in judged if j.unit_hash == candidate_hash and j.sglang_version == sglang_version), None)
    if earlier is not None:
        return TryDecision(False, f"this unit of {profile} was already tried on SGLang {sglang_version}: "
                                  f"release {earlier.release_id}, {earlier.result}; change it to try again")
    if not in_window(window, now):
        return TryDecision(False, f"outside the maintenance window ({window}): watch only")
    return TryDecision(True, f"trying {profile}: its unit differs from the live one and was not judged yet")


@dataclass(frozen=True)
class RollbackDecision:
    attempt: bool
    reason: str
    target: Release | None = None  # the earlier release to try


def earlier_release(live: Release, releases: Mapping[int, Release]) -> Release | None:
    """The known-good before ``live``: the release it replaced, going further back past any with the
    same unit (a re-adopted or re-installed copy), None when the ledger knows of none."""
    seen = {live.id}
    at = live.previous_id
    while at is not None and at not in seen and at in releases:
        release = releases[at]
        if release.unit_hash != live.unit_hash:
            return release
        seen.add(at)
        at = release.previous_id
    return None


def decide_rollback(on_degraded: str, live: Release, measured: bool, releases: Mapping[int, Release],
                    tried: Iterable[Judged], sglang_version: str, *, window: str | None, now: datetime) -> RollbackDecision:
    """Whether a degraded ``live`` release is to be judged against the release before it, now.

    ``tried``: earlier such trials, each as the unit it tried on the live release's behalf (the ledger's
    ``canary-rollback`` releases replacing ``live``): one not kept is not tried again on that version."""
    if on_degraded != "rollback":
        return RollbackDecision(False, "alert only (policy.canary.on_degraded: alert)")
    if not measured:
        return RollbackDecision(False, "no synthetic measurement of the live server to compare an earlier release "
                                       "with (it did not answer, or it was watched passively under its users): "
                                       "alert only")
    target = earlier_release(live, releases)
    if target is None:
        return RollbackDecision(False, f"release {live.id} replaced no release the ledger knows of: nothing to roll "
                                       "back to, alert only")
    before = next((t for t in tried if t.unit_hash == target.unit_hash and t.sglang_version == sglang_version), None)
    if before is not None:
        return RollbackDecision(False, f"release {target.id}'s unit was already judged against release {live.id} on "
                                       f"SGLang {sglang_version} (release {before.release_id}, {before.result}): "
                                       "no better release, alert only", target)
    if not in_window(window, now):
        return RollbackDecision(False, f"outside the maintenance window ({window}): alert only", target)
    return RollbackDecision(True, f"trying release {target.id} ({target.profile or 'unnamed'}): kept only if it "
                                  "measures better now", target)


_EVERY = {"s": 1, "min": 60, "h": 3600, "d": 86400}
# A canary run is at least a watch (a sweep or a passive window of tens of seconds) and often a promote: a
# shorter period only makes the runs back to back and takes the server's capacity for monitoring.
MIN_EVERY_S = 60


def every_to_calendar(every: str) -> tuple[str, int]:
    """``--every 6h`` as a systemd ``OnCalendar=`` (which ``Persistent=true`` needs) and a random delay.

    Only periods that divide the next unit up evenly have a calendar form ("60s", "15min", "6h", "1d"), and none
    shorter than ``MIN_EVERY_S``;
    the random delay spreads hosts over a tenth of the period, at most 30 minutes."""
    number = every.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = every[len(number):]
    if not number.isdigit() or unit not in _EVERY or int(number) <= 0:
        raise ValueError(f"cannot read the period {every!r}: use e.g. 30s, 15min, 6h, 1d")
    n = int(number)
    if n * _EVERY[unit] < MIN_EVERY_S:
        raise ValueError(f"the period {every!r} is shorter than the minimum of {MIN_EVERY_S} s (1min): each run "
                         "measures the server, so runs that close would follow each other back to back")
    if unit == "s" and 60 % n == 0:
        calendar = f"*:*:00/{n}"
    elif unit == "min" and 60 % n == 0:
        calendar = f"*:00/{n}"
    elif unit == "h" and 24 % n == 0:
        calendar = f"*-*-* 00/{n}:00:00"
    elif unit == "d" and n == 1:
        calendar = "daily"
    else:
        raise ValueError(f"the period {every!r} does not divide the next unit up evenly (a minute, an hour, a day); "
                         "use e.g. 20s, 15min, 6h or 1d")
    return calendar, min(n * _EVERY[unit] // 10, 1800)

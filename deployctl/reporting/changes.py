"""What changed between the known-good release and the candidate: profile diff, startup diff, gates."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Sequence

from deployctl.decisions.records import Event, Release
from deployctl.startup.diff import diff_startups
from deployctl.startup.parser import StartupReport
from deployctl.units.profilediff import diff_profiles, format_profile_diff


@dataclass(frozen=True)
class Changes:
    profile_diff: tuple[str, ...]
    startup_diff: tuple[str, ...]
    gates: tuple[str, ...]  # "passed" or each failure, in the gate check's words


def release_changes(release: Release, known_good: Release | None, events: Sequence[Event]) -> Changes:
    diff = None
    profile_lines: tuple[str, ...] = ()
    if known_good is not None and not known_good.flags:
        # An adopted unit has no recorded profile: its unit text is all there is to compare.
        profile_lines = (f"release {known_good.id} ({known_good.kind}) recorded no flags; its unit text → this one's:",
                         *_unit_diff(known_good.unit_text, release.unit_text))
    elif known_good is not None:
        # The ledger keeps each release's resolved flags and environment; that is all a profile diff reads.
        diff = diff_profiles(SimpleNamespace(flags=known_good.flags, env=known_good.env),  # type: ignore[arg-type]
                             SimpleNamespace(flags=release.flags, env=release.env))  # type: ignore[arg-type]
        profile_lines = (f"{known_good.profile or 'installed unit'} (release {known_good.id}) → {release.profile}:",
                         *format_profile_diff(diff))
    startup_lines: tuple[str, ...] = ()
    if release.baseline_startup and release.startup:
        changes = diff_startups(StartupReport.from_dict(release.baseline_startup),
                                StartupReport.from_dict(release.startup), profile_diff=diff)
        startup_lines = tuple(c.text for c in changes) or ("no startup fact changed",)
    return Changes(profile_lines, startup_lines, _gates(events))


def _gates(events: Sequence[Event]) -> tuple[str, ...]:
    """The startup gates' outcome: the outcome event that follows their intent."""
    at = next((k for k, e in enumerate(events) if e.kind == "intent" and e.name == "CheckStartupGates"), None)
    if at is None:
        return ("not checked (the candidate did not get that far)",)
    outcome = next((e for e in events[at + 1:] if e.kind == "outcome"), None)
    if outcome is None:
        return ("no outcome recorded (the promote stopped during the check)",)
    return tuple(outcome.detail.get("reasons", ())) or ("passed",)


def _unit_diff(before: str, after: str) -> list[str]:
    """The unit texts' changed lines, less comments and deployctl's own bookkeeping (hash, profile name)."""

    def meaningful(text: str) -> list[str]:
        return [ln for ln in text.splitlines() if not ln.lstrip().startswith(("#", "X-Deployctl-Hash="))]

    lines = difflib.unified_diff(meaningful(before), meaningful(after), n=0, lineterm="")
    return [ln for ln in lines if not ln.startswith(("---", "+++", "@@"))] or ["no differences"]

"""The runner against a ledger on disk, read from a second connection as a recovering process would.

- intent before side effect: inside each fake side effect, a second connection already reads the step's
  state and intent (what a controller killed right there leaves for ``recovery``);
- a ledger that stops taking writes mid-promote (locked past its busy timeout, a real SQLite fault) ends
  the promote with the known-good unit restored without the ledger, exit 12 naming the ledger's fault, and
  the release left unfinished for the next command, which closes it once the ledger works again.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest
from support.promote import bench, plan
from support.runner_fakes import FakeBench, FakeJudge, FakeUnits, adapters

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.bench.result import BenchResult
from deployctl.errors import ExitCode, RollbackFailed
from deployctl.judge.outcome import JudgeOutcome
from deployctl.flows.recover import recover, recovery_plan
from deployctl.live.runner import Runner
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import JudgeResult


def _begin(ledger: Ledger) -> tuple[int, int]:
    p = plan()
    prev = ledger.begin_release(deployment="qwen", kind="adopted", unit_name=p.unit_name, unit_text=p.known_good_text,
                                unit_hash=p.known_good_hash, who="t", finished=True, live=True)
    rid = ledger.begin_release(deployment="qwen", kind="promote", unit_name=p.unit_name, unit_text=p.candidate_text,
                               unit_hash=p.candidate_hash, who="t", profile="candidate", previous_id=prev)
    return prev, rid


def _seen(state_dir: Path, release_id: int) -> tuple[str | None, tuple[str, str, str] | None]:
    """The saved phase and the last event, read by another process's connection."""
    with Ledger.open(state_dir) as other:
        events = other.events(release_id)
        last = (events[-1].phase, events[-1].kind, events[-1].name) if events else None
        return other.get(release_id).phase, last


class WitnessUnits(FakeUnits):
    """Checks, at each side effect, that the ledger already holds its intent."""

    def __init__(self, state_dir: Path, release_id: list[int]) -> None:
        super().__init__()
        self.state_dir, self.release_id = state_dir, release_id
        self.seen: list[tuple[str | None, Any]] = []

    def _witness(self) -> None:
        self.seen.append(_seen(self.state_dir, self.release_id[0]))

    async def install_trial(self, name: str, text: str) -> str:
        self._witness()
        return await super().install_trial(name, text)

    async def keep(self, name: str, candidate_hash: str) -> str:
        self._witness()
        return await super().keep(name, candidate_hash)

    async def restore(self, name: str, known_good_text: str | None, known_good_hash: str | None) -> str:
        self._witness()
        return await super().restore(name, known_good_text, known_good_hash)


async def test_every_side_effect_finds_its_intent_already_in_the_ledger(tmp_path: Path) -> None:
    rid: list[int] = []
    units = WitnessUnits(tmp_path, rid)
    with Ledger.open(tmp_path) as ledger:
        prev, release = _begin(ledger)
        rid.append(release)
        out = await Runner(ledger, adapters(units=units), plan(), release, previous_release_id=prev).run(m.start())
    assert out.state.result is m.Result.KEPT
    assert units.seen == [("INSTALL", ("INSTALL", "intent", "InstallTrial")),
                          ("KEEP", ("KEEP", "intent", "KeepCandidate"))]


async def test_the_rollback_finds_its_intent_already_in_the_ledger(tmp_path: Path) -> None:
    rid: list[int] = []
    units = WitnessUnits(tmp_path, rid)
    fail = FakeJudge([JudgeResult(JudgeOutcome.FAIL, ("-20 %",))])
    with Ledger.open(tmp_path) as ledger:
        prev, release = _begin(ledger)
        rid.append(release)
        out = await Runner(ledger, adapters(units=units, judge=fail), plan(), release,
                           previous_release_id=prev).run(m.start())
    assert out.state.result is m.Result.REJECTED
    assert units.seen[-1] == ("ROLLBACK", ("ROLLBACK", "intent", "RestoreBaseline"))


class LockingBench(FakeBench):
    """The candidate's benchmark runs while another process holds the ledger's write lock."""

    def __init__(self, state_dir: Path, results: Sequence[BenchResult]) -> None:
        super().__init__(results)
        self.state_dir = state_dir
        self.holder: sqlite3.Connection | None = None

    async def sweep(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int) -> BenchResult:
        if len(self.calls) == 1:  # the baseline is recorded; the candidate's result will not be
            self.holder = sqlite3.connect(str(self.state_dir / LEDGER_FILE), isolation_level=None)
            self.holder.execute("BEGIN EXCLUSIVE")
        return await super().sweep(url, levels, trials)


async def test_a_ledger_locked_mid_promote_rolls_back_without_it_then_exit_12(tmp_path: Path) -> None:
    locking = LockingBench(tmp_path, [bench({1: 120, 64: 1500}), bench({1: 121, 64: 1510})])
    a = adapters(bench_=locking)
    with Ledger.open(tmp_path, busy_timeout_s=0.2) as ledger:
        prev, rid = _begin(ledger)
        with pytest.raises(RollbackFailed) as caught:
            await Runner(ledger, a, plan(), rid, previous_release_id=prev).run(m.start())
    err = caught.value
    assert err.exit_code == ExitCode.ROLLBACK_FAILED
    assert "ledger" in err.message and "locked" in err.message and "during BENCH" in err.message
    assert "rolled back to the known-good unit" in err.message and "write lock" in (err.hint or "")
    # The way back needed no ledger: remove the trial (restore), reload and restart, fresh.
    assert a.units.calls == ["install_trial", "restart", "restore", "restart"] and a.units.fresh[-1] is True
    assert locking.holder is not None
    locking.holder.execute("ROLLBACK")
    locking.holder.close()
    # The release was left unfinished at BENCH; the next command closes it by rolling back (a no-op here).
    with Ledger.open(tmp_path) as ledger:
        assert [r.id for r in ledger.unfinished("qwen")] == [rid]
        again = adapters(bench_=FakeBench([bench({1: 120})]))
        said = await recover(ledger, "qwen", again, lambda r: recovery_plan(ledger, r, plan()), "status")
        assert said[0].rolled_back and ledger.get(rid).finished
        assert ledger.live_release("qwen").id == prev  # type: ignore[union-attr]


async def test_a_ledger_that_fails_before_any_change_only_says_so(tmp_path: Path) -> None:
    locking = LockingBench(tmp_path, [bench({1: 120, 64: 1500})])
    locking.calls.append((None, None))  # lock before the baseline is recorded
    a = adapters(bench_=locking)
    with Ledger.open(tmp_path, busy_timeout_s=0.2) as ledger:
        prev, rid = _begin(ledger)
        with pytest.raises(Exception) as caught:
            await Runner(ledger, a, plan(), rid, previous_release_id=prev).run(m.start())
    assert getattr(caught.value, "exit_code", None) == ExitCode.ENVIRONMENT and a.units.calls == []
    assert locking.holder is not None
    locking.holder.close()

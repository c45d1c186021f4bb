"""The readiness decision on data: scripted journal lines, unit states, health answers and a fake clock."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import AsyncIterator, Iterable

import pytest

from deployctl.operations.ready_wait import wait_ready
from deployctl.startup.journal_line import JournalLine
from deployctl.startup.readiness import (
    READY_LINE,
    Crashed,
    ReadinessTracker,
    Ready,
    TimedOut,
    crash_reason,
)
from deployctl.units.state import CLD_EXITED, CLD_KILLED, UnitState

RUNNING = UnitState(
    name="sglang-x.service", load_state="loaded", active_state="active", sub_state="running", result="success",
    main_pid=4242, exec_main_code=0, exec_main_status=0, n_restarts=0, invocation_id="a" * 32,
    active_enter_us=1, need_daemon_reload=False, fragment_path="/etc/systemd/system/sglang-x.service",
)
EXITED_1 = replace(RUNNING, active_state="failed", sub_state="failed", result="exit-code", main_pid=0,
                   exec_main_code=CLD_EXITED, exec_main_status=1)


def out(text: str, ts: float = 0.0) -> JournalLine:
    return JournalLine(ts=ts, text=text)


def pid1(text: str) -> JournalLine:
    return JournalLine(ts=0.0, text=text, from_manager=True)


class FakeClock:
    """Time moves only when someone sleeps; sleeping costs no real time."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds
        await asyncio.sleep(0)


async def scripted(items: Iterable[object], then_block: bool = True) -> AsyncIterator[object]:
    for item in items:
        yield item
        await asyncio.sleep(0)
    if then_block:
        await asyncio.Event().wait()


# --- the pure tracker --------------------------------------------------------------------------------


def test_ready_line_decides_ready_with_elapsed_time() -> None:
    t = ReadinessTracker(started_at=10.0, timeout_s=60, baseline=RUNNING)
    assert t.on_line(out("Load weight begin."), 11.0) is None
    outcome = t.on_line(out(f"[2026-01-01 10:00:00] {READY_LINE}"), 14.5)
    assert isinstance(outcome, Ready) and outcome.via == "log" and outcome.elapsed_s == pytest.approx(4.5)
    assert outcome.ok and outcome.kind == "ready"


def test_ready_text_from_pid1_does_not_count() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=60, baseline=RUNNING)
    assert t.on_line(pid1(f"echo {READY_LINE}"), 1) is None


def test_health_200_decides_ready() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=60, baseline=RUNNING)
    assert t.on_health(False, 1) is None
    outcome = t.on_health(True, 2)
    assert isinstance(outcome, Ready) and outcome.via == "health"


def test_crash_waits_for_the_closing_pid1_line_and_keeps_the_last_lines() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=60, baseline=RUNNING)
    t.on_line(out("Load weight begin."), 1)
    assert t.on_state(EXITED_1, 2) is None  # not final yet: the journal lags the D-Bus signal
    assert t.on_line(out("torch.OutOfMemoryError: CUDA out of memory."), 2.01) is None
    outcome = t.on_line(pid1("sglang-x.service: Failed with result 'exit-code'."), 2.02)
    assert isinstance(outcome, Crashed)
    assert outcome.reason.startswith("exited with status 1")
    assert "torch.OutOfMemoryError: CUDA out of memory." in outcome.last_lines
    assert outcome.elapsed_s == 2 and not outcome.ok


def test_crash_is_final_after_the_grace_period_without_pid1_lines() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=60, baseline=RUNNING, crash_grace_s=0.5)
    t.on_state(EXITED_1, 2)
    assert t.on_tick(2.4) is None
    assert isinstance(t.on_tick(2.5), Crashed)


def test_ready_line_after_a_crash_does_not_make_it_ready() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=60, baseline=RUNNING)
    t.on_state(EXITED_1, 2)
    assert t.on_line(out(READY_LINE), 2.1) is None
    assert t.on_health(True, 2.2) is None
    assert isinstance(t.on_tick(3), Crashed)


def test_timeout_names_the_last_own_line_as_where_it_was_stuck() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=600, baseline=RUNNING)
    t.on_line(out("Capture cuda graph begin. This can take up to several minutes. avail mem=20.1 GB"), 5)
    t.on_line(out("\x1b[32mCapturing batches (bs=8):  50%|\r\x1b[32mCapturing batches (bs=4):  75%|\x1b[0m"), 6)
    t.on_line(pid1("some PID 1 chatter"), 7)
    assert t.on_tick(599.9) is None
    outcome = t.on_tick(600)
    assert isinstance(outcome, TimedOut)
    assert outcome.last_line == "Capturing batches (bs=4):  75%|"
    assert not outcome.ok and outcome.kind == "timeout"


def test_outcome_is_final() -> None:
    t = ReadinessTracker(started_at=0, timeout_s=1, baseline=RUNNING)
    first = t.on_tick(1)
    assert t.on_line(out(READY_LINE), 2) is first


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, None),
        ({"active_state": "activating", "sub_state": "auto-restart", "exec_main_code": CLD_EXITED,
          "exec_main_status": 1}, "exited with status 1"),
        ({"invocation_id": "b" * 32, "n_restarts": 1, "exec_main_code": CLD_KILLED, "exec_main_status": 9},
         "killed by signal 9 (SIGKILL) and systemd restarted it"),
        ({"n_restarts": 1, "exec_main_code": CLD_EXITED, "exec_main_status": 2}, "exited with status 2 and systemd"),
        ({"active_state": "inactive", "sub_state": "dead", "exec_main_code": CLD_EXITED}, "exited with status 0"),
        ({"active_state": "failed", "exec_main_code": CLD_EXITED, "exec_main_status": 203},
         "exited with status 203 (could not execute the command)"),
    ],
)
def test_crash_reason(change: dict[str, object], expected: str | None) -> None:
    reason = crash_reason(RUNNING, replace(RUNNING, **change))
    assert (reason is None) if expected is None else (reason is not None and reason.startswith(expected))


# --- the driver --------------------------------------------------------------------------------------


async def test_wait_ready_on_the_ready_line() -> None:
    clock = FakeClock()
    seen: list[JournalLine] = []
    outcome = await wait_ready(
        lines=scripted([out("Load weight begin."), out(READY_LINE)]), states=scripted([RUNNING]),
        timeout_s=60, clock=clock, baseline=RUNNING, on_line=seen.append,
    )
    assert isinstance(outcome, Ready) and outcome.via == "log"
    assert [line.text for line in seen] == ["Load weight begin.", READY_LINE]


async def test_wait_ready_on_health_when_the_log_says_nothing() -> None:
    answers = iter([False, False, True])

    async def probe() -> bool:
        return next(answers)

    clock = FakeClock()
    outcome = await wait_ready(lines=scripted([]), states=scripted([RUNNING]), timeout_s=60, probe=probe,
                               clock=clock, probe_interval_s=2.0)
    assert isinstance(outcome, Ready) and outcome.via == "health"
    assert outcome.elapsed_s >= 4.0


async def test_wait_ready_times_out_without_sleeping() -> None:
    clock = FakeClock()
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await wait_ready(lines=scripted([out("Capture cuda graph begin.")]), states=scripted([RUNNING]),
                               timeout_s=1800, clock=clock, tick_s=1.0)
    assert isinstance(outcome, TimedOut) and outcome.last_line == "Capture cuda graph begin."
    assert outcome.elapsed_s == pytest.approx(1800, abs=1.0)
    assert loop.time() - started < 5  # 30 simulated minutes, no real waiting


async def test_wait_ready_crash_from_state_changes() -> None:
    clock = FakeClock()
    outcome = await wait_ready(
        lines=scripted([out("Load weight begin."), out("RuntimeError: boom"),
                        pid1("x.service: Main process exited, code=exited, status=1/FAILURE"),
                        pid1("x.service: Failed with result 'exit-code'.")]),
        states=scripted([RUNNING, EXITED_1]), timeout_s=60, clock=clock, baseline=RUNNING,
    )
    assert isinstance(outcome, Crashed)
    assert "RuntimeError: boom" in outcome.last_lines
    assert outcome.state is not None and outcome.state.exec_main_status == 1


async def test_wait_ready_dead_before_waiting_began() -> None:
    # The process died between the job's end and the first state read: the baseline itself is the evidence.
    outcome = await wait_ready(lines=scripted([]), states=scripted([]), timeout_s=60, clock=FakeClock(),
                               baseline=EXITED_1)
    assert isinstance(outcome, Crashed) and outcome.reason.startswith("exited with status 1")


async def test_wait_ready_survives_sources_that_end() -> None:
    outcome = await wait_ready(lines=scripted([out("x")], then_block=False), states=scripted([], then_block=False),
                               timeout_s=5, clock=FakeClock())
    assert isinstance(outcome, TimedOut) and outcome.last_line == "x"

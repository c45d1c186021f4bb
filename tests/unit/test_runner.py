"""The runner with scripted adapters: act → record → advance, intents before side effects, aborts."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from support.promote import bench, memory_ledger, plan, startup
from support.runner_fakes import (
    KNOWN_HOST, FakeBench, FakeHost, FakeJudge, FakePreflight, FakeUnits, adapters, with_trials,
)

from deployctl.bench.result import BenchResult
from deployctl.errors import ExitCode, SystemdError
from deployctl.inventory.policy import JudgePolicy, LevelRule
from deployctl.judge.noise import DEFAULT_RESTART_WEIGHT, learn_restart, restart_pair
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import StartsVerdict
from deployctl.judge.stats import DEFAULT_RESTART_SIGMA, RestartNoise
from deployctl.live.bindings import LiveJudge
from deployctl.live.runner import Runner
from deployctl.decisions import machine as m
from deployctl.decisions.canary import ServerStart, WatchStart
from deployctl.decisions.decided import decided
from deployctl.decisions.evidence import GateResult, JudgeResult, StartOutcome, bench_key
from deployctl.decisions.report import outcome_json, outcome_lines


@pytest.fixture
def ledger():
    with memory_ledger() as led:
        yield led


def _begin(ledger, p):
    prev = ledger.begin_release(deployment=p.deployment, kind="adopted", unit_name=p.unit_name,
                                unit_text=p.known_good_text, unit_hash=p.known_good_hash, who="t",
                                finished=True, live=True)
    rid = ledger.begin_release(deployment=p.deployment, kind="promote", unit_name=p.unit_name,
                               unit_text=p.candidate_text, unit_hash=p.candidate_hash, who="t",
                               profile=p.profile, previous_id=prev)
    return prev, rid


async def _run(ledger, a, p=None, state=None, **kw):
    p = p or plan()
    prev, rid = _begin(ledger, p)
    runner = Runner(ledger, a, p, rid, previous_release_id=prev, **kw)
    return await runner.run(state or m.start()), prev, runner


async def test_pass_is_kept_and_recorded(ledger):
    a = adapters()
    out, prev, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.OK and out.state.result is m.Result.KEPT
    assert a.units.calls == ["install_trial", "restart", "keep"]
    assert ledger.live_release("qwen").id == out.release_id
    release = ledger.get(out.release_id)
    assert release.finished and release.result == "kept" and release.verdict == "PASS"
    assert release.baseline_startup["max_running_requests"] == 48
    events = ledger.events(out.release_id)
    kinds = [(e.kind, e.phase) for e in events]
    # Each action's intent is recorded before its outcome, phase by phase.
    assert kinds[0] == ("intent", "PREFLIGHT") and kinds[1] == ("outcome", "PREFLIGHT")
    assert ("intent", "INSTALL") in kinds and kinds.index(("intent", "INSTALL")) < kinds.index(("outcome", "INSTALL"))
    assert [b.role for b in ledger.benches(out.release_id)] == ["baseline", "candidate"]
    assert out.overhead_s <= out.wall_s


async def test_startup_gate_failure_rolls_back_without_benchmarking_the_candidate(ledger):
    gate = GateResult(False, ("max_running_requests 48 → 26 (−45.8 %, limit −10 %)",))
    bench_ = FakeBench([bench({1: 120, 64: 1500}), bench({1: 120})])
    a = adapters(judge=FakeJudge(gates=gate), bench_=bench_)
    cand = StartOutcome(True, "ready", startup=startup(26), wait_s=1.0)
    a.units = FakeUnits(outcomes={plan().candidate_text: cand})
    out, prev, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.REJECTED
    assert a.units.calls == ["install_trial", "restart", "restore", "restart"]
    assert len(bench_.calls) == 2 and bench_.calls[1] == ([1], 1)  # baseline, then the verification only
    assert any("48 → 26" in r for r in out.state.reasons)
    assert out.evidence.startup_diff == ("max_running_requests 48 → 26",)
    assert ledger.live_release("qwen").id == prev
    assert ledger.get(out.release_id).verdict == "FAIL (startup gate)"


async def test_crash_on_start_is_rejected_with_the_servers_reason(ledger):
    crash = StartOutcome(False, "crashed", "exit status 2: unrecognized arguments: --enable-bogus")
    a = adapters(bench_=FakeBench([bench({1: 120, 64: 1500}), bench({1: 120})]))
    a.units = FakeUnits(outcomes={plan().candidate_text: crash})
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.REJECTED
    assert any("unrecognized arguments: --enable-bogus" in r for r in out.state.reasons)


async def test_failed_rollback_exits_12_and_retries_with_a_fresh_start(ledger):
    down = StartOutcome(False, "crashed", "exit status 1")
    a = adapters(judge=FakeJudge([JudgeResult(JudgeOutcome.FAIL, ("C=64: −87 %",))]))
    a.units = FakeUnits(outcomes={plan().known_good_text: down})
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.ROLLBACK_FAILED
    assert a.units.fresh == [False, False, True]
    assert ledger.get(out.release_id).result == "rollback_failed"


async def test_inconclusive_benchmarks_more_trials_then_keeps_the_baseline(ledger):
    more = ((64, 2),)
    verdicts = [JudgeResult(JudgeOutcome.INCONCLUSIVE, (), more), JudgeResult(JudgeOutcome.INCONCLUSIVE, ("C=64: −3 % ± 4 %",), more)]
    b = FakeBench([bench({1: 120, 64: 1500}), bench({1: 120, 64: 1450}), bench({64: 1460}), bench({1: 120})])
    p = plan(policy=plan().policy.model_copy(update={"judge": plan().policy.judge.model_copy(update={"max_trials": 3})}))
    a = adapters(judge=FakeJudge(verdicts), bench_=b)
    out, _, _ = await _run(ledger, a, p=p, state=m.start(m.Limits(bench_rounds=2)))
    assert out.exit_code == ExitCode.INCONCLUSIVE
    assert b.calls[2] == ([64], {64: 2})


@pytest.mark.parametrize("judge_update,baseline_trials", [({"max_trials": 4}, 4), ({"max_trials": 4, "baseline_trials": 2}, 2)])
async def test_two_levels_with_nothing_learned_measure_the_whole_baseline_at_once(ledger, judge_update, baseline_trials):
    # Two levels' first stage would have 2 df, too few to plan on: max_trials in one sweep (or the operator's count).
    p = plan(policy=plan().policy.model_copy(update={"judge": plan().policy.judge.model_copy(update=judge_update)}))
    a = adapters()
    await _run(ledger, a, p=p)
    assert a.bench.calls[0] == (None, {1: baseline_trials, 64: baseline_trials})
    assert a.bench.calls[1] == (None, p.policy.judge.min_trials)
    assert a.judge.noise == {}


def _spread(values: list[float]) -> BenchResult:
    one = bench({1: 1.0, 64: 1.0}, trials=len(values))
    levels = tuple(replace(lv, trials=tuple(replace(t, output_tok_s=v) for t, v in zip(lv.trials, values)))
                   for lv in one.levels)
    return replace(one, levels=levels)


def _apart(result: BenchResult) -> BenchResult:
    """The first level's trials in reverse order: the levels do not move together trial by trial (a shock
    they share would leave the sweep's pooled σ with the trials' df, not the levels', docs/judge.md)."""
    first = result.levels[0]
    values = [t.output_tok_s for t in first.trials][::-1]
    flipped = replace(first, trials=tuple(replace(t, output_tok_s=v) for t, v in zip(first.trials, values)))
    return replace(result, levels=(flipped, *result.levels[1:]))


@pytest.mark.parametrize("history,rounds,role", [([1000.0, 1003.0, 998.0, 1001.0, 999.0], 0, "baseline"),
                                                ([1000.0, 1100.0, 930.0, 1060.0, 950.0], 3, "baseline"),
                                                ([1000.0, 1100.0, 930.0, 1060.0, 950.0], 3, "watch")])
async def test_learned_noise_sizes_the_baseline_in_rounds_and_reaches_the_judge(ledger, history, rounds, role):
    p = plan(policy=plan().policy.model_copy(update={"judge": JudgePolicy(min_trials=2, max_trials=5)}))
    earlier = ledger.begin_release(deployment=p.deployment, kind="adopted", unit_name=p.unit_name,
                                   unit_text=p.known_good_text, unit_hash=p.known_good_hash, who="t", finished=True)
    # an earlier baseline, or a canary's watch of the live release: both are A/A samples of this host
    ledger.save_bench(earlier, role, _spread(history), unit_hash=p.known_good_hash, bench_key=bench_key(p.policy), host=p.host)
    pilot = _apart(bench({1: 120, 64: 1500}, trials=2, spread=0.01))
    a = adapters(bench_=FakeBench([pilot] + [bench({1: 121, 64: 1490})] * rounds
                                  + [bench({1: 121, 64: 1510}), bench({1: 120})]))
    out, _, _ = await _run(ledger, a, p=p)
    said = next(d for d in out.state.done if d.startswith("baseline: "))
    assert said.startswith("baseline: 2 trial(s) a level") and ("then C=1 +3, C=64 +3" in said) == bool(rounds)
    # Learned 4 df + the first stage's 2: enough to plan on, so the first stage is min_trials a level;
    # a quiet host stops there; on a noisy one every round asks one more trial a level, up to max_trials,
    # all before the candidate starts.
    assert a.bench.calls[0] == (None, {1: 2, 64: 2})
    assert a.bench.calls[1:1 + rounds] == [([1, 64], {1: 1, 64: 1})] * rounds
    assert a.bench.calls[1 + rounds] == (None, 2)  # the candidate
    assert set(a.judge.noise) == {1, 64} and a.judge.noise[64].df == 4


async def test_the_restart_sigma_is_the_default_until_the_ledger_holds_the_unit_on_two_starts(ledger):
    p = plan()
    a = adapters()
    out, _, _ = await _run(ledger, a, p=p)
    assert a.judge.restart.df is None and a.judge.restart.source.startswith("default")
    said = next(d for d in out.state.done if d.startswith("baseline: "))
    assert f"restart σ {100 * DEFAULT_RESTART_SIGMA:.1f} % a side (default" in said
    # An earlier promote that rolled back: its baseline, then the verification of the restarted unit,
    # 5 % faster at both levels — a restart offset (or drift) the trials alone do not explain.
    earlier = ledger.begin_release(deployment=p.deployment, kind="promote", unit_name=p.unit_name,
                                   unit_text=p.candidate_text, unit_hash=p.candidate_hash, who="t", finished=True)
    ledger.save_bench(earlier, "baseline", _apart(bench({1: 120, 64: 1500}, trials=2, spread=0.01)),
                      unit_hash=p.known_good_hash, bench_key=bench_key(p.policy), host=p.host)
    ledger.save_bench(earlier, "verify", bench({1: 126, 64: 1575}), unit_hash=p.known_good_hash,
                      bench_key="verify:[1, 64]", host=p.host)
    a = adapters()
    out, _, _ = await _run(ledger, a, p=p)
    assert a.judge.restart.df == DEFAULT_RESTART_WEIGHT + 1
    assert a.judge.restart.source.startswith("learned from 1 restart pair(s)")
    assert a.judge.restart.sigma > DEFAULT_RESTART_SIGMA
    said = next(d for d in out.state.done if d.startswith("baseline: "))
    assert "(learned from 1 restart pair(s) of this host" in said


async def test_a_canary_watch_after_a_restart_is_a_restart_pair_the_noise_line_names(ledger):
    p = plan()
    key = dict(unit_hash=p.known_good_hash, bench_key=bench_key(p.policy), host=p.host)
    live = ledger.begin_release(deployment=p.deployment, kind="adopted", unit_name=p.unit_name, unit_text="x",
                                unit_hash=p.known_good_hash, who="t", finished=True, live=True)
    reference = ledger.save_bench(live, "reference", _apart(bench({1: 120, 64: 1500}, trials=2, spread=0.01)), **key)
    measured = ledger.benches(live)[0].at
    watch = ledger.save_bench(live, "watch", bench({1: 126, 64: 1575}), **key)  # 5 % faster on the next start
    ledger.record(live, "canary", "note", "watch",
                  WatchStart(ServerStart("second", measured + 1), watch, reference, measured).to_dict())
    a = adapters()
    out, _, _ = await _run(ledger, a, p=p)
    assert a.judge.restart.df == DEFAULT_RESTART_WEIGHT + 1 and a.judge.restart.sigma > DEFAULT_RESTART_SIGMA
    said = next(d for d in out.state.done if d.startswith("baseline: "))
    assert "(learned from 1 restart pair(s) of this host (1 canary watch after a restart)" in said


async def test_preflight_errors_refuse_before_touching_anything(ledger):
    a = adapters(preflight=FakePreflight(["--enable-flashinfer-allreduce-fusion is a no-op on sm120"]))
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.PREFLIGHT_REFUSED and a.units.calls == []


async def test_unchanged_candidate_does_nothing(ledger):
    a = adapters()
    p = plan(candidate_hash=plan().known_good_hash)
    out, _, _ = await _run(ledger, a, p=p, state=m.start(unchanged=p.unchanged))
    assert out.state.result is m.Result.UNCHANGED and a.units.calls == []


async def test_adapter_errors_become_failures_and_roll_back(ledger):
    a = adapters(bench_=FakeBench([bench({1: 120, 64: 1500}), bench({1: 120})]))
    a.units = FakeUnits(install_error=SystemdError("cannot write /run/…: read-only", hint="check mounts"))
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.REJECTED
    assert any("read-only" in r and "check mounts" in r for r in out.state.reasons)


async def test_unusable_baseline_is_refused(ledger):
    a = adapters(bench_=FakeBench([bench({1: 0, 64: 0}, ok=0)]))
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.PREFLIGHT_REFUSED
    # Two levels and nothing learned: the whole baseline (5 trials a level, 4 requests each) at once.
    assert any("all 40 requests failed: connect ×40" in r for r in out.state.reasons)


# A baseline with a spread (3 trials, 2 % apart), so its trials have a noise to check against.
STORED = bench({1: 120, 64: 1500}, trials=3, spread=0.02)


async def _first_promote(ledger):
    out, _, _ = await _run(ledger, adapters(bench_=FakeBench([STORED, bench({1: 121, 64: 1510}), bench({1: 120})])))
    assert out.state.result is m.Result.KEPT
    return out


async def test_unchanged_host_reuses_the_stored_baseline_after_one_confirmation_trial_per_critical_level(ledger):
    first = await _first_promote(ledger)
    b = FakeBench([bench({1: 121, 64: 1496}), bench({1: 121, 64: 1510})])
    out, _, _ = await _run(ledger, adapters(bench_=b))
    assert out.state.result is m.Result.KEPT
    assert b.calls[0] == ([1, 64], 1)  # the confirmation: one trial at each critical level
    assert len(b.calls) == 2  # then the candidate; no baseline sweep
    assert out.evidence.baseline_reused_from == first.release_id
    reuse = out.evidence.reuse
    assert reuse.reused_from == first.release_id and reuse.confirmation_trials == 2
    counted = out.evidence.trials(5)
    assert (counted.baseline, counted.confirmation) == (0, 2)  # the stored trials were not run today
    # what a fresh baseline would have run, planned from today's baseline (stored + confirmation): this
    # quiet host with min_trials 1 would have run one trial a level, so reuse saved nothing, and says so
    assert reuse.baseline_trials == 2
    assert reuse.trial_s == 1.0 and reuse.saved_s == 0.0
    # the judged baseline is the stored trials plus the confirmation trial; the ledger keeps it, marked reused
    rows = [b for b in ledger.benches(out.release_id) if b.role == "baseline"]
    assert len(rows) == 1 and rows[0].reused_from == first.release_id
    assert rows[0].fingerprint.gpu_driver == "570.86.15"
    note = next(e for e in ledger.events(out.release_id) if e.name == "benchmark")
    assert note.detail["reuse"]["reused_from"] == first.release_id and note.detail["confirmation_s"] >= 0
    assert "baseline: reused the measurement of release" in note.detail["reason"]
    # a reused row is never itself reused (its age is the original's), nor learned from twice
    assert ledger.stored_baseline(unit_hash=plan().known_good_hash, bench_key=bench_key(plan().policy), host="h1").release_id \
        == first.release_id


async def test_a_disagreeing_confirmation_trial_measures_a_fresh_baseline(ledger):
    await _first_promote(ledger)
    fresh = bench({1: 100, 64: 1250}, trials=3, spread=0.02)
    b = FakeBench([bench({1: 60, 64: 1500}), fresh, bench({1: 100, 64: 1250})])  # C=1 halved since
    out, _, _ = await _run(ledger, adapters(bench_=b))
    assert [c[0] for c in b.calls] == [[1, 64], None, None]  # confirmation, fresh baseline, candidate
    assert out.evidence.baseline is fresh and out.evidence.baseline_reused_from is None
    assert any("no longer describes the server" in r and "C=1" in r for r in out.state.reasons)
    assert out.evidence.bench_time.confirmation_s >= 0 and out.evidence.reuse is None
    counted = out.evidence.trials(5)
    assert (counted.baseline, counted.confirmation) == (6, 2)  # both were run today: both count
    rows = [b for b in ledger.benches(out.release_id) if b.role == "baseline"]
    assert len(rows) == 1 and rows[0].reused_from is None


@pytest.mark.parametrize("change, reason", [
    (dict(gpu_driver="575.51.03"), "the GPU driver changed: 570.86.15 → 575.51.03"),
    (dict(sglang_version="0.5.11"), "the SGLang version changed: 0.5.10 → 0.5.11"),
    (dict(power_limit_w=600.0), "the GPU power limit changed: 700.0 → 600.0"),
    (dict(clocks_policy="application clocks SM 1500 MHz"), "the GPU clocks policy changed"),
    (dict(gpu_model=None), "the GPU model is not known for today"),
])
async def test_a_changed_fingerprint_measures_a_fresh_baseline_and_says_why(ledger, change, reason):
    await _first_promote(ledger)
    b = FakeBench([STORED, bench({1: 121, 64: 1510})])
    out, _, _ = await _run(ledger, adapters(bench_=b, host=FakeHost(replace(KNOWN_HOST, **change))))
    assert [c[0] for c in b.calls] == [None, None]  # no confirmation trial: a fresh baseline at once
    assert out.evidence.baseline_reused_from is None
    assert any(reason in why for why in out.evidence.fresh_because), out.evidence.fresh_because


async def test_without_a_stated_version_the_logged_range_keys_the_baseline_never_none(ledger):
    """The server states no version and the log only a range: the range is the key. With neither, no reuse."""
    ranged = replace(startup(48), sglang_version=None, sglang_version_range="0.5.10 or newer")
    a = adapters(bench_=FakeBench([STORED, bench({1: 121, 64: 1510})]),
                 host=FakeHost(replace(KNOWN_HOST, sglang_version=None)))
    a.startup.report = ranged
    out, _, _ = await _run(ledger, a)
    assert out.evidence.fingerprint.sglang_version == "0.5.10 or newer"
    a = adapters(bench_=FakeBench([STORED, bench({1: 121, 64: 1510})]),
                 host=FakeHost(replace(KNOWN_HOST, sglang_version=None)))
    a.startup.report = replace(ranged, sglang_version_range=None)
    out, _, _ = await _run(ledger, a)
    assert out.evidence.fingerprint.sglang_version is None
    assert "the SGLang version is not known for today" in out.evidence.fresh_because


async def test_fresh_baseline_asked_for_is_measured(ledger):
    await _first_promote(ledger)
    b = FakeBench([STORED, bench({1: 121, 64: 1510})])
    out, _, _ = await _run(ledger, adapters(bench_=b), baseline_max_age_s=0.0)
    assert [c[0] for c in b.calls] == [None, None] and out.evidence.baseline_reused_from is None
    assert "--fresh-baseline" in out.evidence.fresh_because[0]


async def test_abort_during_bench_cancels_it_and_rolls_back(ledger):
    slow = FakeBench([bench({1: 120, 64: 1500}), bench({1: 120})])
    a = adapters(bench_=slow)
    p = plan()
    prev, rid = _begin(ledger, p)
    runner = Runner(ledger, a, p, rid, previous_release_id=prev)

    original = slow.sweep

    async def sweep(url, levels, trials):
        if len(slow.calls) == 1:  # the candidate's sweep: hangs until aborted
            slow.calls.append((levels, trials))
            runner.request_abort("aborted by bob")
            await asyncio.sleep(60)
        return await original(url, levels, trials)

    slow.sweep = sweep
    out = await asyncio.wait_for(runner.run(m.start()), 5)
    assert out.state.result is m.Result.ABORTED and out.exit_code == ExitCode.INTERRUPTED
    assert a.units.calls == ["install_trial", "restart", "restore", "restart"]
    assert "aborted by bob" in out.state.reasons
    assert ledger.live_release("qwen").id == prev


async def test_resumed_rollback_needs_no_earlier_evidence(ledger):
    """Recovery runs the machine from ROLLBACK with nothing measured in this process."""
    a = adapters(bench_=FakeBench([bench({1: 120})]))
    resumed = m.resume_after_crash(m.State(phase=m.Phase.BENCH), "controller died during BENCH")
    out, prev, _ = await _run(ledger, a, state=resumed)
    assert out.state.phase is m.Phase.DONE and a.units.calls == ["restore", "restart"]
    assert ledger.live_release("qwen").id == prev


async def test_an_unexpected_error_rolls_back_instead_of_leaving_the_candidate(ledger):
    class Broken(FakeBench):
        async def sweep(self, url, levels, trials):
            self.calls.append((levels, trials))
            if len(self.calls) == 2:
                raise RuntimeError("boom")
            return with_trials(bench({1: 120.0}), trials)

    a = adapters(bench_=Broken([]))
    out, prev, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.REJECTED
    assert a.units.calls == ["install_trial", "restart", "restore", "restart"]
    assert any("unexpected error in BenchCandidate: RuntimeError('boom')" in r for r in out.state.reasons)


async def test_a_restored_baseline_that_fails_its_health_check_is_a_failed_rollback(ledger):
    a = adapters(judge=FakeJudge([JudgeResult(JudgeOutcome.FAIL, ("C=64: −87 %",))]),
                 bench_=FakeBench([bench({1: 120, 64: 1500}), bench({1: 20, 64: 200})], healthy=False))
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.ROLLBACK_FAILED
    assert any("/health does not answer 200" in r for r in out.state.reasons)


# --- the output gate ---------------------------------------------------------------------------------

class FakeOutputs:
    """A server whose greedy answers are the probes' own (or wrong ones on a corrupted candidate)."""

    def __init__(self) -> None:
        self.references = 0
        self.wrong = False

    async def reference(self, url, policy, scope):
        from deployctl.live.output_gate import probe_set
        from deployctl.outputgate.compare import Reference
        from deployctl.outputgate.record import ReferenceSet

        self.references += 1
        top = ((5, -0.05), (6, -3.0))
        refs = {p.id: Reference(p.id, (1, 2), (5,), (-0.05,), (top,), f" {p.answer or 'the'}")
                for p in probe_set(policy).probes}
        return ReferenceSet(scope, probe_set(policy).version, refs, requests=len(refs))

    async def measure(self, url, policy, refs, *, answers):
        from deployctl.outputgate.compare import Scored
        from deployctl.outputgate.record import Measured

        top = ((6, -0.05), (5, -3.0)) if self.wrong else ((5, -0.05), (6, -3.0))
        scores = {i: Scored(i, (top[0][1] if not self.wrong else -3.0,), (top,)) for i in refs.refs}
        said = {i: (" 99999" if self.wrong else r.text) for i, r in refs.refs.items()} if answers else {}
        return Measured(scores, said, 0, len(scores) * (2 if answers else 1), 0.1)


def _gated(ledger):
    from support.promote import POLICY

    from deployctl.inventory.policy import OutputGatePolicy

    policy = POLICY.model_copy(update={"gates": POLICY.gates.model_copy(update={"output": OutputGatePolicy(probes=24)})})
    return plan(policy=policy), m.start(m.Limits(output_gate=True))


async def test_a_passing_candidate_with_wrong_answers_is_rejected_by_the_output_gate(ledger):
    p, state = _gated(ledger)
    a = adapters()
    a.outputs = FakeOutputs()
    a.outputs.wrong = True
    out, _, _ = await _run(ledger, a, p, state)
    assert out.exit_code == ExitCode.REJECTED and "keep" not in a.units.calls
    assert any(r.startswith("output changed: accuracy") for r in out.state.reasons), out.state.reasons
    events = [e for e in ledger.events(out.release_id) if e.name == "outputs"]
    assert len(events) == 1 and events[0].detail["outcome"] == "FAIL"


async def test_the_baselines_answers_are_stored_and_reused_by_the_next_promote(ledger):
    p, state = _gated(ledger)
    a = adapters()
    a.outputs = FakeOutputs()
    first, _, _ = await _run(ledger, a, p, state)
    assert first.exit_code == ExitCode.OK and first.evidence.output.outcome is JudgeOutcome.PASS
    b = adapters()
    b.outputs = a.outputs
    second, _, _ = await _run(ledger, b, p, state)
    assert second.exit_code == ExitCode.OK and a.outputs.references == 1
    assert second.evidence.outputs_reference.reused_from == first.release_id


# --- a rolled-back verdict decided over server starts -------------------------------------------

OVER_STARTS = ((1, 3), (64, 3))


def _starts(outcome, reason):
    return StartsVerdict(outcome, (reason,), RestartNoise(0.02, None, "guard"))


async def test_a_fail_a_restart_offset_could_explain_is_decided_over_two_baseline_starts(ledger):
    p = plan()
    verdicts = [JudgeResult(JudgeOutcome.FAIL, ("C=64: −7 %",), over_starts=OVER_STARTS, record={"outcome": "FAIL"})]
    judge = FakeJudge(verdicts, starts=_starts(JudgeOutcome.INCONCLUSIVE, "a restart offset of up to 6 % could explain it"))
    b = FakeBench([bench({1: 120, 64: 1500}, trials=2, spread=0.01), bench({1: 119, 64: 1400}, trials=2, spread=0.01),
                   bench({1: 120, 64: 1480}), bench({1: 121, 64: 1490})])
    a = adapters(judge=judge, bench_=b)
    out, _, _ = await _run(ledger, a, p=p)
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.state.result is m.Result.INCONCLUSIVE
    # The candidate restarted in place and measured on every critical level k times (C2), then the
    # rollback's verification the same on the restored baseline's new start (B2) ...
    assert a.units.calls == ["install_trial", "restart", "restart", "restore", "restart"]
    assert b.calls[-2:] == [([1, 64], dict(OVER_STARTS))] * 2
    assert [len(lv.trials) for lv in out.evidence.verify.levels] == [3, 3]
    assert [b.role for b in ledger.benches(out.release_id)] == ["baseline", "candidate", "candidate-restart", "verify"]
    # ... and the candidate on its two starts was judged against the baseline on its two; the drift check
    # only says whether the baseline moved (no A-B-A reading beside it: one story).
    (before, after), (c1, c2) = judge.starts_asked[0]
    assert (before, after) == (out.evidence.baseline, out.evidence.verify)
    assert [c1, c2] == [out.evidence.candidate, *out.evidence.candidate_again]
    assert judge.drift_asked == [(None, None)]
    assert "a restart offset of up to 6 % could explain it" in out.state.reasons
    # the terminal report and --json say it
    assert ("verdict over server starts (the baseline's before the promote and after the rollback, the candidate's "
            "its two): INCONCLUSIVE") in outcome_lines(out)
    assert outcome_json(out)["starts"]["outcome"] == "INCONCLUSIVE" and outcome_json(out)["verdict"] == "FAIL"
    assert out.state.reasons[-1].startswith("inconclusive, not rejected: a slower server start could explain")
    release = ledger.get(out.release_id)
    assert release.result == "inconclusive" and release.verdict == "INCONCLUSIVE (over two baseline starts)"
    stored = decided(ledger.events(out.release_id))
    assert stored.outcome == "FAIL" and stored.starts["outcome"] == "INCONCLUSIVE"
    assert stored.starts["restart"]["sigma"] == 0.02 and stored.starts_line().startswith(
        "decided over server starts (INCONCLUSIVE): a restart offset of up to 6 % could explain it; restart σ 2.0 % a start")
    # The candidate's two starts, and the baseline and the verification, are each one unit on two server
    # starts: restart pairs the next promote learns from.
    pairs = ledger.restart_pairs(deployment=p.deployment, host=p.host, bench_key=bench_key(p.policy),
                                 exclude_releases=())
    assert [(x.before.role, x.after.role) for x in pairs] == [("candidate", "candidate-restart"), ("baseline", "verify")]
    learned = learn_restart([pair for x in pairs
                             if (pair := restart_pair(x.before.bench, x.after.bench, p.policy.judge.metric, {}, x.source))])
    assert learned.source.startswith(
        "learned from 2 restart pair(s) of this host (1 candidate restarted in place, 1 rollback verification)")


async def test_an_inconclusive_decided_over_two_starts_can_become_a_rejection(ledger):
    p = plan(policy=plan().policy.model_copy(update={"judge": plan().policy.judge.model_copy(update={"max_trials": 1})}))
    verdicts = [JudgeResult(JudgeOutcome.INCONCLUSIVE, ("C=64: unclear",), over_starts=OVER_STARTS)]
    judge = FakeJudge(verdicts, starts=_starts(JudgeOutcome.FAIL, "over 2 baseline starts: −9 %, limit −5 %"))
    b = FakeBench([bench({1: 120, 64: 1500}), bench({1: 121, 64: 1400}), bench({1: 120, 64: 1390}), bench({1: 120})])
    out, _, _ = await _run(ledger, adapters(judge=judge, bench_=b), p=p, state=m.start(m.Limits(bench_rounds=1)))
    assert out.exit_code == ExitCode.REJECTED
    assert ledger.get(out.release_id).verdict == "FAIL (over two baseline starts)"
    assert out.state.reasons[-1].startswith("rejected: worse beyond the limit against the baseline on both")


async def test_a_candidate_that_does_not_come_back_on_its_second_start_is_rejected_on_that(ledger):
    verdicts = [JudgeResult(JudgeOutcome.FAIL, ("C=64: −7 %",), over_starts=OVER_STARTS)]
    judge = FakeJudge(verdicts)
    a = adapters(judge=judge)

    class CrashesOnItsSecondStart(FakeUnits):
        async def restart_and_wait(self, name, timeout_s, *, fresh_start=False):
            if self.calls.count("restart") == 1:  # the candidate's first start was the one before
                self.outcomes[plan().candidate_text] = StartOutcome(False, "crashed", "exit status 1")
            return await super().restart_and_wait(name, timeout_s, fresh_start=fresh_start)

    a.units = CrashesOnItsSecondStart()
    out, _, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.REJECTED and judge.starts_asked == []
    assert "the candidate did not come back on a second server start (crashed): exit status 1" in out.state.reasons
    assert ledger.get(out.release_id).verdict == "FAIL"


ONE_LEVEL = ((64, 5),)


def _three_starts_world(crash_on: int):
    """A one-level FAIL to decide over three starts a side; the ``crash_on``-th restart of the unit (counting
    the candidate's first as 1) comes back crashed, whatever it runs."""
    judge = FakeJudge([JudgeResult(JudgeOutcome.FAIL, ("C=64: −7 %",), over_starts=ONE_LEVEL, starts=3)],
                      starts=_starts(JudgeOutcome.INCONCLUSIVE, "a restart offset of up to 2 % could explain it"))
    b = FakeBench([bench({1: 120, 64: 1500}), bench({1: 120, 64: 1400}), bench({64: 1410}, trials=5),
                   bench({64: 1405}, trials=5), bench({64: 1500}, trials=5), bench({64: 1495}, trials=5)])

    class CrashesOnce(FakeUnits):
        async def restart_and_wait(self, name, timeout_s, *, fresh_start=False):
            if self.calls.count("restart") + 1 == crash_on and not fresh_start:
                self.calls.append("restart")
                return StartOutcome(False, "crashed", "exit status 1")
            return await super().restart_and_wait(name, timeout_s, fresh_start=fresh_start)

    a = adapters(judge=judge, bench_=b)
    a.units = CrashesOnce()
    return a, judge, b


async def test_a_candidate_that_does_not_come_back_on_its_third_start_is_rejected_on_that(ledger):
    a, judge, _ = _three_starts_world(crash_on=3)  # C1, C2, then C3 crashes
    out, prev, _ = await _run(ledger, a)
    assert out.exit_code == ExitCode.REJECTED and judge.starts_asked == []
    assert "the candidate did not come back on a third server start (crashed): exit status 1" in out.state.reasons
    assert a.units.calls == ["install_trial", "restart", "restart", "restart", "restore", "restart"]
    assert [x.role for x in ledger.benches(out.release_id)] == ["baseline", "candidate", "candidate-restart", "verify"]
    assert ledger.get(out.release_id).verdict == "FAIL" and ledger.live_release("qwen").id == prev


async def test_a_restored_baseline_that_does_not_come_back_on_its_third_start_is_judged_on_two_and_says_so(ledger):
    a, judge, b = _three_starts_world(crash_on=5)  # C1, C2, C3, the rollback (B2), then B3's restart crashes
    out, prev, _ = await _run(ledger, a)
    # Not worse than two starts a side: a fresh start brings the known-good unit back, the verdict over starts is
    # judged on B1, B2 and the candidate's three, and the operator reads why.
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.state.phase is m.Phase.DONE
    assert a.units.calls == ["install_trial", "restart", "restart", "restart", "restore", "restart", "restart", "restart"]
    assert a.units.fresh[-1] is True and a.units.running[plan().unit_name]
    (baselines, candidates), = judge.starts_asked
    assert len(baselines) == 2 and len(candidates) == 3 and len(b.results) == 1  # B3 never measured
    assert any(r.startswith("judged on two baseline starts: the restored baseline did not come back on a third "
                            "server start (crashed: exit status 1)") for r in out.state.reasons), out.state.reasons
    assert out.state.reasons[-1] == ("inconclusive, not rejected: a slower server start could explain the FAIL "
                                     "(judged over two baseline starts)")
    assert ledger.get(out.release_id).verdict == "INCONCLUSIVE (over two baseline starts)"
    assert ledger.live_release("qwen").id == prev


async def test_a_robust_fail_verifies_with_one_trial_and_no_verdict_over_starts(ledger):
    judge = FakeJudge([JudgeResult(JudgeOutcome.FAIL, ("C=64: −30 %",))])
    b = FakeBench([bench({1: 120, 64: 1500}), bench({1: 120, 64: 1050}), bench({1: 120})])
    out, _, _ = await _run(ledger, adapters(judge=judge, bench_=b))
    assert out.exit_code == ExitCode.REJECTED and b.calls[-1] == ([1], 1)
    assert judge.starts_asked == [] and judge.drift_asked[0][1] is JudgeOutcome.FAIL  # the A-B-A reading, as before
    assert out.evidence.starts is None and ledger.get(out.release_id).verdict == "FAIL"


async def test_a_pass_a_restart_offset_could_explain_is_rolled_back_and_decided_over_starts(ledger):
    # The real judge: −5 % at the one critical level passes stage 1 on one start a side, but a 2 % restart
    # offset a start could hide −9.8 % behind it: never kept. One critical level: three starts a side — C2, C3,
    # the rollback, B2, B3 — and over them it stays INCONCLUSIVE (exit 11).
    policy = plan().policy.model_copy(update={"judge": JudgePolicy(levels={1: LevelRule(role="advisory")})})
    p = plan(policy=policy)
    b = FakeBench([bench({1: 120, 64: 1500}, trials=5, spread=0.02), bench({1: 120, 64: 1425}, trials=5, spread=0.02),
                   bench({1: 120, 64: 1420}, trials=5, spread=0.02), bench({1: 120, 64: 1430}, trials=5, spread=0.02),
                   bench({1: 120, 64: 1500}, trials=5, spread=0.02), bench({1: 120, 64: 1490}, trials=5, spread=0.02)])
    a = adapters(judge=LiveJudge(policy), bench_=b)
    out, prev, _ = await _run(ledger, a, p=p)
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.state.result is m.Result.INCONCLUSIVE
    # C2, C3 (restarted in place), the rollback, B2, B3 (restarted in place)
    assert a.units.calls == ["install_trial", "restart", "restart", "restart", "restore", "restart", "restart"]
    assert b.calls[-4:] == [([64], {64: 5})] * 4 and not b.results
    assert ledger.live_release("qwen").id == prev  # the baseline runs
    release = ledger.get(out.release_id)
    assert release.result == "inconclusive" and release.verdict == "INCONCLUSIVE (over three baseline starts)"
    benches = ledger.benches(out.release_id)
    assert [x.role for x in benches] == ["baseline", "candidate", "candidate-restart", "candidate-restart", "verify",
                                         "verify"]
    assert len({(x.role, x.bench_key) for x in benches}) == 6  # no start's row stands for another's
    assert [x.bench for x in benches[2:4]] == out.evidence.candidate_again
    assert [x.bench for x in benches[4:]] == [out.evidence.verify, *out.evidence.verify_again]
    assert any(r.startswith("INCONCLUSIVE over server starts: C=64 ") and "against the baseline on 3 server starts, "
               "the candidate on 3" in r for r in out.state.reasons), out.state.reasons
    assert out.state.reasons[0].startswith("INCONCLUSIVE: PASS on one server start a side, but a restart offset of up "
                                           "to 2.0 % a start (guard: ")
    assert out.state.reasons[0].endswith("could hide a regression of twice the limit (−9.8 %): decided over server starts")
    assert out.state.reasons[-1] == "still inconclusive over three baseline starts: the baseline was kept"
    assert outcome_json(out)["verdict"] == "INCONCLUSIVE" and decided(ledger.events(out.release_id)).outcome == "INCONCLUSIVE"
    assert "verdict: INCONCLUSIVE" in outcome_lines(out)


async def test_with_inconclusive_keep_candidate_such_a_pass_is_kept_and_says_so(ledger):
    judge_policy = JudgePolicy(levels={1: LevelRule(role="advisory")}, inconclusive="keep_candidate")
    policy = plan().policy.model_copy(update={"judge": judge_policy})
    b = FakeBench([bench({1: 120, 64: 1500}, trials=5, spread=0.02), bench({1: 120, 64: 1425}, trials=5, spread=0.02)])
    a = adapters(judge=LiveJudge(policy), bench_=b)
    out, _, _ = await _run(ledger, a, p=plan(policy=policy), state=m.start(m.Limits(keep_when_inconclusive=True)))
    assert out.exit_code == ExitCode.OK and out.state.result is m.Result.KEPT
    assert a.units.calls == ["install_trial", "restart", "keep"]
    assert out.state.reasons[0].endswith("the policy (inconclusive: keep_candidate) keeps the candidate all the same")
    assert out.state.reasons[-1] == "inconclusive with no trial left to ask on this server start; the policy keeps the candidate"
    assert ledger.get(out.release_id).verdict == "INCONCLUSIVE"

"""The output gate's pure core: the probe set, grading, top-k KL, McNemar, the verdict and the policy."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from deployctl.inventory.policy import OutputGatePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.outputgate.accuracy import paired, wilson
from deployctl.outputgate.compare import Reference, Scored, shift, topk_kl
from deployctl.outputgate.probes import Probe, ProbeSet, correct, shipped
from deployctl.outputgate.record import ReferenceSet
from deployctl.outputgate.verdict import decide

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_probe_set_is_the_generators_output_and_has_every_kind():
    spec = importlib.util.spec_from_file_location("gen_probes", REPO / "scripts" / "gen_probes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.OUT.read_text() == gen.render(), "probes-v1.json is stale: run scripts/gen_probes.py"
    probes = shipped()
    assert probes.version.startswith("v1+sha256:") and len(probes.probes) >= 300
    kinds = {p.kind for p in probes.probes}
    assert kinds == {"math", "fact", "text", "chat"}
    assert sum(p.checkable for p in probes.probes) >= 200
    assert len({p.id for p in probes.probes}) == len(probes.probes)


def test_a_subset_takes_every_kind_in_turn_and_is_stable():
    sub = shipped().subset(8)
    assert [p.kind for p in sub.probes][:4] == ["math", "fact", "text", "chat"]
    assert sub == shipped().subset(8) and sub.version.endswith("[8]")


@pytest.mark.parametrize("answer, text, right", [
    ("121", " 121. with time", True), ("121", " 12 1", False), ("121", " nothing", False),
    ("Paris", " paris, of course", True), ("Paris", " Lyon", False), ("0", " 0.", True),
])
def test_grading(answer, text, right):
    assert correct(Probe("x", "math", "q", answer), text) is right


def lp(p):
    return math.log(p)


def test_topk_kl_is_zero_for_the_same_distribution_and_grows_with_the_change():
    p = ((1, lp(0.7)), (2, lp(0.2)), (3, lp(0.05)))
    assert topk_kl(p, p) == pytest.approx(0.0, abs=1e-12)
    near = ((1, lp(0.68)), (2, lp(0.22)), (3, lp(0.05)))
    far = ((9, lp(0.9)), (1, lp(0.05)))
    assert 0 < topk_kl(p, near) < 0.01 < topk_kl(p, far)


def test_shift_finds_the_first_divergence():
    top = ((5, lp(0.6)), (6, lp(0.3)))
    ref = Reference("a", (1, 2), (5, 5, 5), (lp(0.6),) * 3, (top,) * 3, " x x x")
    flipped = ((6, lp(0.55)), (5, lp(0.4)))
    s = shift(ref, Scored("a", (lp(0.6), lp(0.4), lp(0.6)), (top, flipped, top)))
    assert s.first_divergence == 1 and s.same_top == (True, False, True)
    assert s.dp[1] == pytest.approx(-0.2)


def test_mcnemar_counts_only_discordant_pairs():
    same = paired([True] * 50, [True] * 50)
    assert same.p_worse == 1.0 and same.lost == 0
    worse = paired([True] * 50, [True] * 40 + [False] * 10)
    assert worse.lost == 10 and worse.p_worse == pytest.approx(0.5 ** 10)
    mixed = paired([True, False] * 10, [False, True] * 10)
    assert mixed.p_worse > 0.5
    lo, hi = wilson(45, 50)
    assert lo < 0.9 < hi


def _world(n: int, noise: float, wrong: bool = False):
    probes = ProbeSet("test", tuple(Probe(f"m{i}", "math", f"q{i}", str(i)) for i in range(n)))
    refs, floor, scores, answers = {}, {}, {}, {}
    for p in probes.probes:
        tok = 100 + int(p.answer)
        top = ((tok, lp(0.9)), (7, lp(0.05)))
        refs[p.id] = Reference(p.id, (1,), (tok,), (lp(0.9),), (top,), f" {p.answer}")
        floor[p.id] = Scored(p.id, (lp(0.9),), (top,))
        moved = ((7, lp(0.8)), (tok, lp(0.1))) if wrong else ((tok, lp(0.9 - noise)), (7, lp(0.05 + noise)))
        scores[p.id] = Scored(p.id, (dict(moved)[tok],), (moved,))
        answers[p.id] = " 7" if wrong else f" {p.answer}"
    return probes, refs, floor, scores, answers


def test_the_verdict_passes_a_small_shift_and_fails_corrupted_outputs():
    policy = OutputGatePolicy()
    ok = decide(policy, *_world(40, 0.01))
    assert ok.outcome is JudgeOutcome.PASS and ok.reasons[0].startswith("outputs unchanged")
    bad = decide(policy, *_world(40, 0.0, wrong=True))
    assert bad.outcome is JudgeOutcome.FAIL and bad.reasons[0].startswith("output changed: accuracy 40/40 → 1/40")  # m7 answers 7
    assert bad.examples and bad.examples[0].candidate == " 7"
    assert ReferenceSet.from_dict(ReferenceSet("k", "test", _world(3, 0)[1]).to_dict()).refs == _world(3, 0)[1]


def test_failed_probes_or_a_noisy_floor_are_inconclusive():
    policy = OutputGatePolicy()
    probes, refs, floor, scores, answers = _world(40, 0.0)
    assert decide(policy, probes, refs, floor, scores, answers, failed=10, requests=80).outcome is JudgeOutcome.INCONCLUSIVE
    noisy = {i: Scored(i, s.logprobs, (((7, lp(0.9)),),)) for i, s in floor.items()}
    said = decide(policy, probes, refs, noisy, scores, answers)
    assert said.outcome is JudgeOutcome.INCONCLUSIVE and "disagrees with itself" in said.reasons[0]


def test_policy_rejects_nonsense_with_the_key():
    with pytest.raises(ValueError, match="probes"):
        OutputGatePolicy(probes=1)


def test_a_stored_reference_is_found_by_its_scope_in_the_ledger():
    from deployctl.adapters.ledger import Ledger

    refs = _world(3, 0)[1]
    scope = "unit=abc;host=h;sglang=0.5.10;gpu=NVIDIA;probes=v1+sha256:ab12[12];new=24;k=5"
    with Ledger.in_memory() as ledger:
        release = ledger.begin_release(deployment="d", kind="promote", profile="p", unit_name="u.service",
                                       unit_text="[Service]\n", unit_hash="abc", who="t")
        ledger.record(release, "BASELINE", "evidence", "outputs-reference", ReferenceSet(scope, "test", refs).to_dict())
        found = ledger.stored_outputs(scope, max_age_s=60)
        assert found is not None and found[0] == release
        assert ReferenceSet.from_dict(found[1]).refs == refs  # nothing redacted on the way
        assert ledger.stored_outputs(scope + "x", max_age_s=60) is None


def test_the_report_has_the_output_panel_with_the_diverging_prompts_side_by_side():
    from deployctl.adapters.ledger import Ledger
    from deployctl.reporting.page import release_page
    from deployctl.reporting.story import release_story

    verdict = decide(OutputGatePolicy(), *_world(40, 0.0, wrong=True))
    with Ledger.in_memory() as ledger:
        release = ledger.begin_release(deployment="d", kind="promote", profile="p", unit_name="u.service",
                                       unit_text="[Service]\n", unit_hash="abc", who="t")
        ledger.record(release, "OUTPUTS", "evidence", "outputs", verdict.to_dict())
        ledger.finish(release, result="rejected", verdict="PASS", reasons=list(verdict.reasons))
        story = release_story(ledger.get(release), [], ledger.events(release))
    html = release_page(story, None)
    assert 'id="chart-output-gate"' in html and 'id="chart-output-examples"' in html
    assert "40/40 (91 %–100 %)" in html and "<td>m0</td><td>q0</td><td> 0</td><td> 7</td>" in html

"""The changes a bisect searches over, cut from the semantic profile diff."""

from __future__ import annotations

import yaml

from deployctl.inventory.schema import ResolvedProfile
from deployctl.decisions.bisect_changes import changes_from_diff, overlay, profile_definition, profile_yaml
from deployctl.units.profilediff import diff_profiles


def _diff(a: dict, b: dict, env_a: dict | None = None, env_b: dict | None = None):
    return diff_profiles(ResolvedProfile(flags=a, env=env_a or {}), ResolvedProfile(flags=b, env=env_b or {}))


def test_each_flag_and_env_difference_is_one_change() -> None:
    diff = _diff({"tp": 8, "disable-radix-cache": True}, {"tp": 4, "enable-metrics": True},
                 {"OMP_NUM_THREADS": "8", "A": "1"}, {"OMP_NUM_THREADS": "4", "B": "2"})
    changes = changes_from_diff(diff)
    assert [c.text for c in changes] == ["+ --enable-metrics", "- --disable-radix-cache", "~ --tp 8 -> 4",
                                         "+ B=2", "- A", "~ OMP_NUM_THREADS 8 -> 4"]
    flags, env = overlay(changes)
    assert flags == {"enable-metrics": True, "disable-radix-cache": None, "tp": 4}
    assert env == {"B": "2", "A": None, "OMP_NUM_THREADS": "4"}


def test_a_flag_and_the_values_it_implies_are_one_change() -> None:
    diff = _diff({"tp": 4}, {"tp": 4, "speculative-num-steps": 3, "speculative-algorithm": "EAGLE",
                             "speculative-eagle-topk": 1, "enable-metrics": True},
                 {}, {"SGLANG_ENABLE_SPEC_V2": "1"})
    changes = changes_from_diff(diff)
    assert len(changes) == 2
    spec = changes[0]
    assert spec.texts[0] == "+ --speculative-algorithm EAGLE"
    assert set(spec.flags) == {"speculative-algorithm", "speculative-num-steps", "speculative-eagle-topk"}
    assert spec.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert "speculative_algorithm" in spec.keys and "env:SGLANG_ENABLE_SPEC_V2" in spec.keys


def test_implied_values_without_their_leader_stay_separate_changes() -> None:
    changes = changes_from_diff(_diff({"speculative-algorithm": "EAGLE"},
                                      {"speculative-algorithm": "EAGLE", "speculative-num-steps": 5}))
    assert [c.text for c in changes] == ["+ --speculative-num-steps 5"]


def test_the_survivor_is_a_profile_extending_the_live_one() -> None:
    changes = changes_from_diff(_diff({"a": 1, "b": True}, {"a": 2}, {}, {"X": "1"}))
    definition = profile_definition("baseline", changes, "candidate minus --enable-x")
    assert yaml.safe_load(profile_yaml("candidate-bisected", definition)) == {"candidate-bisected": {
        "description": "candidate minus --enable-x", "extends": "baseline",
        "flags": {"a": 2, "b": None}, "env": {"X": "1"}}}


def test_a_startup_gate_failure_blames_the_changes_the_catalogue_links_to_its_fact() -> None:
    from deployctl.decisions.bisect_changes import gate_facts, startup_blame
    from deployctl.startup.diff import diff_startups
    from deployctl.startup.report import StartupReport

    changes = changes_from_diff(_diff({"tp": 4}, {"tp": 4, "enable-fused-moe-sum-all-reduce": True,
                                                  "enable-flashinfer-allreduce-fusion": True}))
    facts = gate_facts(["effective max_running_requests fell from 48 to 26 (−46 %, limit −10 %)"])
    assert facts == {"max_running_requests"}
    base = StartupReport("ready", server_info_max_running_requests=48, max_mamba_cache_size=473)
    cand = StartupReport("ready", server_info_max_running_requests=26, max_mamba_cache_size=132)
    diff = _diff({"tp": 4}, {"tp": 4, "enable-fused-moe-sum-all-reduce": True, "enable-flashinfer-allreduce-fusion": True})
    blamed = startup_blame(changes, range(2), facts, diff_startups(base, cand, profile_diff=diff, host="sm120"))
    assert [changes[i].text for i in blamed] == ["+ --enable-flashinfer-allreduce-fusion"]


def test_a_start_that_names_a_flag_blames_that_change() -> None:
    from deployctl.decisions.bisect_changes import startup_blame

    changes = changes_from_diff(_diff({}, {"enable-metrics": True, "enable-warp-drive": True}))
    blamed = startup_blame(changes, range(2), frozenset({"outcome"}), [],
                           "error: unrecognized arguments: --enable-warp-drive")
    assert [changes[i].text for i in blamed] == ["+ --enable-warp-drive"]

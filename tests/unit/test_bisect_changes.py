"""The changes a bisect searches over, cut from the semantic profile diff."""

from __future__ import annotations

import yaml

from deployctl.inventory.schema import ResolvedProfile
from deployctl.promote.bisect_changes import changes_from_diff, overlay, profile_definition, profile_yaml
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

"""diff_profiles: what a candidate changes, as the operator and the startup-diff attribution see it."""

from __future__ import annotations

from testpaths import REPO

from deployctl.inventory.model import ResolvedProfile, load_inventory, resolve_profile
from deployctl.units.profilediff import ProfileDiff, diff_profiles, format_profile_diff


def test_added_removed_changed_flags_and_env() -> None:
    a = ResolvedProfile(flags={"tp": 8, "disable-cuda-graph": True, "mem-fraction-static": 0.92, "port": 8000},
                        env={"NCCL_P2P_LEVEL": "5", "OLD": "x"})
    b = ResolvedProfile(flags={"tp": 8, "mem-fraction-static": 0.85, "enable-metrics": True, "port": 8000},
                        env={"NCCL_P2P_LEVEL": "4", "NEW": "y"})
    diff = diff_profiles(a, b)
    assert diff == ProfileDiff(
        flags_added={"enable-metrics": True}, flags_removed={"disable-cuda-graph": True},
        flags_changed={"mem-fraction-static": (0.92, 0.85)},
        env_added={"NEW": "y"}, env_removed={"OLD": "x"}, env_changed={"NCCL_P2P_LEVEL": ("5", "4")},
    )
    assert diff.changed_flags == {"enable-metrics", "disable-cuda-graph", "mem-fraction-static"}
    assert diff.changed_env == {"NEW", "OLD", "NCCL_P2P_LEVEL"}
    assert format_profile_diff(diff) == [
        "flags:", "  + --enable-metrics", "  - --disable-cuda-graph", "  ~ --mem-fraction-static 0.92  ->  0.85",
        "env:", "  + NEW=y", "  - OLD=x", "  ~ NCCL_P2P_LEVEL=5  ->  4",
    ]


def test_identical_profiles_have_an_empty_diff() -> None:
    profile = ResolvedProfile(flags={"tp": 4}, env={})
    diff = diff_profiles(profile, profile)
    assert diff.empty and format_profile_diff(diff) == ["no differences"]


def test_a_switch_is_not_the_value_one_and_lists_compare_whole() -> None:
    a = ResolvedProfile(flags={"x": True, "bs": ["1", "2"]}, env={})
    b = ResolvedProfile(flags={"x": "1", "bs": ["1", "2", "4"]}, env={})
    diff = diff_profiles(a, b)
    assert diff.flags_changed == {"x": (True, "1"), "bs": (["1", "2"], ["1", "2", "4"])}
    assert format_profile_diff(diff)[1:] == ["  ~ --x  ->  1", "  ~ --bs 1 2  ->  1 2 4"]


def test_the_incident_candidates_differ_by_exactly_their_flags() -> None:
    inv = load_inventory(REPO / "inventory" / "example.yaml")
    glm = diff_profiles(resolve_profile(inv, "glm5", "baseline"), resolve_profile(inv, "glm5", "candidate"))
    assert glm == ProfileDiff(flags_added={"enable-flashinfer-allreduce-fusion": True})
    qwen = diff_profiles(resolve_profile(inv, "qwen35", "baseline"), resolve_profile(inv, "qwen35", "candidate"))
    assert qwen.flags_added == {"enable-fused-moe-sum-all-reduce": True, "enable-flashinfer-allreduce-fusion": True}
    assert qwen.changed_flags == set(qwen.flags_added) and not qwen.changed_env
    demo = load_inventory(REPO / "inventory" / "demo.yaml")
    forced = diff_profiles(resolve_profile(demo, "glm5-sim", "baseline"),
                           resolve_profile(demo, "glm5-sim", "candidate-forced-fusion"))
    assert forced.env_added == {"SGLANG_SIM_FORCE_AR_FUSION": "1"}
    reverse = diff_profiles(resolve_profile(inv, "glm5", "candidate"), resolve_profile(inv, "glm5", "baseline"))
    assert reverse.flags_removed == {"enable-flashinfer-allreduce-fusion": True} and not reverse.flags_added

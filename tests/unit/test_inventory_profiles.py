"""Profile inheritance, value normalisation, policy overlay, and the two shipped inventories."""

from __future__ import annotations

import textwrap

import pytest
from testpaths import REPO

from deployctl.errors import InputError
from deployctl.inventory.model import (
    InventoryInvalid,
    deployment_policy,
    load_inventory,
    parse_inventory,
    profile_chain,
    resolve_profile,
)

BASE = """\
hosts:
  h:
    gpus: {model: NVIDIA RTX PRO 6000 Blackwell, count: 4, compute_capability: sm120}
    python: /opt/sglang/bin/python3
models:
  m:
    path: org/model
    served_name: served
    flags:
      trust-remote-code: true
      reasoning-parser: glm45
    env:
      FROM_PRESET: "1"
"""


def inventory(deployments: str, extra: str = ""):
    return parse_inventory(BASE + textwrap.dedent(extra) + "deployments:\n" + textwrap.indent(textwrap.dedent(deployments), "  "))


CHAIN = """\
d:
  host: h
  unit: sglang-d.service
  port: 8123
  model: m
  profiles:
    baseline:
      flags: {tp: 4, mem-fraction-static: 0.85, disable-cuda-graph: true}
      env: {NCCL_IB_DISABLE: 1, OMP_NUM_THREADS: 8}
    candidate:
      extends: baseline
      flags: {mem-fraction-static: 0.9, enable-flashinfer-allreduce-fusion: true}
    tuned:
      extends: candidate
      flags: {disable-cuda-graph: null, reasoning-parser: null, cuda-graph-bs: [1, 2, 4]}
      env: {OMP_NUM_THREADS: null, FROM_PRESET: null, NEW: x}
    switched-off:
      extends: baseline
      flags: {disable-cuda-graph: false, trust-remote-code: false}
"""


def test_flags_come_in_command_line_order_with_port_last() -> None:
    resolved = resolve_profile(inventory(CHAIN), "d", "baseline")
    assert list(resolved.flags.items()) == [
        ("model-path", "org/model"), ("served-model-name", "served"), ("trust-remote-code", True),
        ("reasoning-parser", "glm45"), ("tp", 4), ("mem-fraction-static", 0.85),
        ("disable-cuda-graph", True), ("port", 8123),
    ]
    assert resolved.env == {"FROM_PRESET": "1", "NCCL_IB_DISABLE": "1", "OMP_NUM_THREADS": "8"}


def test_extends_overrides_in_place_and_adds_at_the_end() -> None:
    flags = resolve_profile(inventory(CHAIN), "d", "candidate").flags
    assert flags["mem-fraction-static"] == 0.9
    names = list(flags)
    assert names.index("mem-fraction-static") < names.index("disable-cuda-graph")  # kept its position
    assert names[-2:] == ["enable-flashinfer-allreduce-fusion", "port"]


def test_null_removes_inherited_and_preset_flags_and_env() -> None:
    resolved = resolve_profile(inventory(CHAIN), "d", "tuned")
    assert "disable-cuda-graph" not in resolved.flags
    assert "reasoning-parser" not in resolved.flags  # came from the model preset
    assert resolved.flags["enable-flashinfer-allreduce-fusion"] is True  # from the grandparent chain
    assert resolved.flags["cuda-graph-bs"] == ["1", "2", "4"]
    assert resolved.env == {"NCCL_IB_DISABLE": "1", "NEW": "x"}


def test_false_leaves_a_switch_out() -> None:
    flags = resolve_profile(inventory(CHAIN), "d", "switched-off").flags
    assert "disable-cuda-graph" not in flags and "trust-remote-code" not in flags


def test_profile_chain_nearest_first() -> None:
    assert profile_chain(inventory(CHAIN), "d", "tuned") == ["tuned", "candidate", "baseline"]


def test_values_keep_the_text_the_operator_wrote() -> None:
    inv = inventory("""\
        d:
          host: h
          unit: sglang-d.service
          port: 8000
          model: m
          profiles:
            baseline:
              flags: {tool-call-parser: 1.10, some-id: 010, tp: 8, mem-fraction-static: 0.92, keep-as-text: "true"}
              env: {VERSION: 1.10, MASK: 010, FLAG: yes, EMPTY: ""}
        """)
    resolved = resolve_profile(inv, "d", "baseline")
    assert resolved.flags["tool-call-parser"] == "1.10"
    assert resolved.flags["some-id"] == "010"
    assert resolved.flags["tp"] == 8 and resolved.flags["mem-fraction-static"] == 0.92
    assert resolved.flags["keep-as-text"] == "true"
    assert resolved.env == {"FROM_PRESET": "1", "VERSION": "1.10", "MASK": "010", "FLAG": "yes", "EMPTY": ""}


def test_yaml_anchors_and_merge_keys_share_flags() -> None:
    inv = inventory("""\
        d:
          host: h
          unit: sglang-d.service
          port: 8000
          model: m
          profiles:
            baseline:
              flags: &common {tp: 4, attention-backend: triton}
            other:
              flags:
                <<: *common
                tp: 2
        """)
    assert resolve_profile(inv, "d", "other").flags["tp"] == 2
    assert resolve_profile(inv, "d", "other").flags["attention-backend"] == "triton"


def test_unknown_names_are_input_errors_that_list_the_known_ones() -> None:
    inv = inventory(CHAIN)
    with pytest.raises(InputError, match=r"no deployment 'x' .*known: d"):
        inv.deployment("x")
    with pytest.raises(InputError, match=r"no profile 'nope' \(known: baseline, candidate, tuned, switched-off\)"):
        resolve_profile(inv, "d", "nope")


def test_deployment_knows_its_name_and_host() -> None:
    inv = inventory(CHAIN)
    dep = inv.deployment("d")
    assert dep.name == "d"
    assert inv.host_of(dep).gpus.count == 4
    assert inv.host_of("d").gpus.capability_major == 12


POLICY = """\
policy:
  judge: {limit_pct: 5, min_trials: 2}
  bench: {concurrency: [1, 4, 16]}
"""


def test_deployment_policy_overlays_the_global_one_deeply() -> None:
    inv = inventory(CHAIN.replace("  profiles:", "  policy:\n    judge: {limit_pct: 2}\n    gates: {startup_timeout_s: 3600}\n  profiles:", 1), POLICY)
    policy = deployment_policy(inv, "d")
    assert policy.judge.limit_pct == 2 and policy.judge.min_trials == 2
    assert policy.bench.concurrency == [1, 4, 16]
    assert policy.gates.startup_timeout_s == 3600
    assert inv.policy.judge.limit_pct == 5


def test_a_deployment_without_policy_gets_the_global_one() -> None:
    inv = inventory(CHAIN, POLICY)
    assert deployment_policy(inv, inv.deployment("d")) == inv.policy


def test_an_override_conflicting_with_the_global_policy_is_reported_at_the_override() -> None:
    text = CHAIN.replace("  profiles:", "  policy:\n    judge: {max_trials: 1}\n  profiles:", 1)
    with pytest.raises(InventoryInvalid) as info:
        inventory(text, POLICY)
    [problem] = info.value.problems
    assert problem.key == "deployments.d.policy.judge"
    assert "max_trials (1) is below min_trials (2)" in problem.message


def test_the_shipped_inventories_are_valid() -> None:
    example = load_inventory(REPO / "inventory" / "example.yaml")
    assert set(example.deployments) == {"glm5", "qwen35"}
    demo = load_inventory(REPO / "inventory" / "demo.yaml")
    assert {"baseline", "candidate", "candidate-forced-fusion", "neutral", "bad-flag", "hangs"} <= set(
        demo.deployment("glm5-sim").profiles)
    assert all(host.simulated for host in demo.hosts.values())
    forced = resolve_profile(demo, "glm5-sim", "candidate-forced-fusion")
    assert forced.env["SGLANG_SIM_FORCE_AR_FUSION"] == "1"
    assert forced.flags["enable-flashinfer-allreduce-fusion"] is True
    assert resolve_profile(demo, "glm5-sim", "hangs").env["SGLANG_SIM_FAULT"] == "hang:cuda_graph"


def test_example_mirrors_incident_a() -> None:
    inv = load_inventory(REPO / "inventory" / "example.yaml")
    base = resolve_profile(inv, "qwen35", "baseline")
    assert {k: base.flags[k] for k in ("tp", "speculative-algorithm", "speculative-num-steps",
                                       "speculative-eagle-topk", "speculative-num-draft-tokens",
                                       "attention-backend", "mem-fraction-static", "mamba-scheduler-strategy")} == {
        "tp": 4, "speculative-algorithm": "NEXTN", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4, "attention-backend": "triton", "mem-fraction-static": 0.85,
        "mamba-scheduler-strategy": "extra_buffer"}
    assert base.env["SGLANG_ENABLE_SPEC_V2"] == "1"
    cand = resolve_profile(inv, "qwen35", "candidate").flags
    assert set(cand) - set(base.flags) == {"enable-fused-moe-sum-all-reduce", "enable-flashinfer-allreduce-fusion"}
    assert inv.hosts[inv.deployment("qwen35").host].gpus.count == 4


def test_a_missing_file_says_where_inventories_come_from(tmp_path) -> None:
    with pytest.raises(InputError) as info:
        load_inventory(tmp_path / "nope.yaml")
    assert "not found" in info.value.message and "DEPLOYCTL_INVENTORY" in (info.value.hint or "")


def test_empty_sections_read_as_empty() -> None:
    inv = inventory("""\
        d:
          host: h
          unit: sglang-d.service
          port: 8000
          model: m
          profiles:
            baseline:
              flags:
              env:
        """, "policy:\n")
    assert resolve_profile(inv, "d", "baseline").flags == {
        "model-path": "org/model", "served-model-name": "served", "trust-remote-code": True,
        "reasoning-parser": "glm45", "port": 8000}


def test_a_profile_extending_itself_is_a_cycle() -> None:
    with pytest.raises(InventoryInvalid) as info:
        inventory("""\
            d:
              host: h
              unit: sglang-d.service
              port: 8000
              model: m
              profiles:
                baseline: {extends: baseline}
            """)
    [problem] = info.value.problems
    assert (problem.key, problem.message) == ("deployments.d.profiles.baseline.extends", "inheritance cycle: baseline -> baseline")
    assert problem.line == BASE.count("\n") + 8  # the 'baseline: {extends: baseline}' line

"""Rendered units: golden files for both real deployments, stamps, layout (systemd-analyze verify: tests/adapters/test_unit_verify.py).

Regenerate the golden files after a deliberate template change with
``UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_render.py`` and review the diff.
"""

from __future__ import annotations

import os
import shlex

import pytest
import yaml
from testpaths import DATA, REPO

from deployctl.inventory.model import (
    load_inventory,
    parse_inventory,
    resolve_profile,
)
from deployctl.units.render import (
    exec_argv,
    render_unit,
    unit_environment,
)
from deployctl.units.stamp import read_stamp, unit_hash

EXAMPLE = REPO / "inventory" / "example.yaml"
DEMO = REPO / "inventory" / "demo.yaml"
GOLDEN = DATA / "golden"

# Incident B's known-good launch, verbatim (shared/reference/incidents.md).
GLM5_KNOWN_GOOD = """\
PYTHONUNBUFFERED=1 NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=5 NCCL_MIN_NCHANNELS=8 OMP_NUM_THREADS=8 \
SAFETENSORS_FAST_GPU=1 CUDA_HOME=/usr/local/cuda-12.8 \
python3 -u -m sglang.launch_server --model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 \
  --reasoning-parser glm45 --tool-call-parser glm47 --trust-remote-code --tp 8 \
  --mem-fraction-static 0.92 --max-running-requests 1024 --kv-cache-dtype auto \
  --quantization modelopt_fp4 --attention-backend flashinfer --fp8-gemm-backend cutlass \
  --nsa-decode-backend trtllm --nsa-prefill-backend trtllm --moe-runner-backend flashinfer_cutlass \
  --disable-cuda-graph --disable-radix-cache --host 0.0.0.0 --port 8000
"""


def _options(argv: list[str]) -> dict[str, tuple[str, ...]]:
    """--flag value… → {flag: (values…)}; --model is SGLang's alias of --model-path."""
    options: dict[str, list[str]] = {}
    current = None
    for arg in argv:
        if arg.startswith("--"):
            current = "model-path" if arg == "--model" else arg[2:]
            options[current] = []
        elif current is not None:
            options[current].append(arg)
    return {k: tuple(v) for k, v in options.items()}


REAL = [("glm5", "baseline"), ("glm5", "candidate"), ("qwen35", "baseline"), ("qwen35", "candidate")]


@pytest.mark.parametrize("deployment,profile", REAL, ids=[f"{d}-{p}" for d, p in REAL])
def test_golden_units_of_the_real_deployments(deployment: str, profile: str) -> None:
    unit = render_unit(load_inventory(EXAMPLE), deployment, profile)
    golden = GOLDEN / f"{deployment}-{profile}.service"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(unit.text)
    assert unit.text == golden.read_text()


def test_golden_simulated_unit() -> None:
    unit = render_unit(load_inventory(DEMO), "glm5-sim", "candidate-forced-fusion", default_python="/usr/bin/python3")
    golden = GOLDEN / "glm5-sim-candidate-forced-fusion.service"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(unit.text)
    assert unit.text == golden.read_text()


def test_glm5_baseline_carries_every_flag_and_variable_of_the_known_good_command() -> None:
    inv = load_inventory(EXAMPLE)
    dep = inv.deployment("glm5")
    resolved = resolve_profile(inv, dep, "baseline")
    words = shlex.split(GLM5_KNOWN_GOOD)
    known_env = dict(w.split("=", 1) for w in words[: words.index("python3")])
    known_argv = words[words.index("sglang.launch_server") + 1:]

    argv = exec_argv(inv, dep, resolved)
    assert argv[1:4] == ["-u", "-m", "sglang.launch_server"]
    assert _options(argv[4:]) == _options(known_argv)
    assert unit_environment(inv.host_of(dep), resolved) == known_env
    text = render_unit(inv, dep, "baseline").text
    for name, value in known_env.items():
        assert f'Environment="{name}={value}"' in text


def test_unit_settings_the_controller_relies_on() -> None:
    text = render_unit(load_inventory(EXAMPLE), "glm5", "candidate").text
    service = text.split("[Service]", 1)[1].split("[Install]", 1)[0]
    lines = [line for line in service.splitlines() if line and not line.startswith(("#", " "))]
    settings = dict(line.split("=", 1) for line in lines if not line.startswith(("Environment=", "ExecStart=")))
    assert settings == {
        "Type": "exec", "EnvironmentFile": "-/etc/deployctl/glm5.env", "SyslogIdentifier": "sglang-glm5",
        "Restart": "no", "KillMode": "control-group", "TimeoutStopSec": "60s", "TimeoutStartSec": "30min",
        "LimitNOFILE": "1048576", "LogRateLimitIntervalSec": "0",
    }
    assert sum(line.startswith("ExecStart=") for line in lines) == 1
    assert "\nStartLimitIntervalSec=0\n" in text.split("[Service]")[0]


def test_simulated_hosts_run_the_simulator_with_the_host_facts() -> None:
    inv = load_inventory(DEMO)
    dep = inv.deployment("qwen35-sim")
    unit = render_unit(inv, dep, "candidate", default_python="/usr/bin/python3")
    assert "ExecStart=/usr/bin/python3 -u -m deployctl.sim \\\n" in unit.text
    env = unit_environment(inv.host_of(dep), resolve_profile(inv, dep, "candidate"))
    assert {k: env[k] for k in env if k.startswith("SGLANG_SIM_")} == {
        "SGLANG_SIM_GPU_NAME": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "SGLANG_SIM_GPU_COUNT": "4",
        "SGLANG_SIM_COMPUTE_CAPABILITY": "sm120", "SGLANG_SIM_GPU_MEMORY_GB": "96",
        "SGLANG_SIM_POWER_LIMIT_W": "600", "SGLANG_SIM_P2P": "0",
    }
    assert env["PYTHONUNBUFFERED"] == "1" and "CUDA_HOME" not in env
    # Same flags as a real host would get: only the module differs.
    argv = exec_argv(inv, dep, resolve_profile(inv, dep, "candidate"), default_python="/usr/bin/python3")
    assert argv[3] == "deployctl.sim" and "--enable-flashinfer-allreduce-fusion" in argv


def test_a_simulated_host_without_python_needs_a_default() -> None:
    from deployctl.errors import InputError
    with pytest.raises(InputError, match="no python"):
        render_unit(load_inventory(DEMO), "glm5-sim", "baseline")


def test_stamp_identifies_the_unit_and_detects_hand_edits() -> None:
    unit = render_unit(load_inventory(EXAMPLE), "glm5", "candidate")
    stamp = read_stamp(unit.text)
    assert stamp is not None
    assert (stamp.deployment, stamp.profile, stamp.sha256, stamp.intact) == ("glm5", "candidate", unit.sha256, True)
    assert unit_hash(unit.text) == unit.sha256 and len(unit.sha256) == 64
    edited = unit.text.replace("--tp 8", "--tp 4")
    assert read_stamp(edited).intact is False
    assert read_stamp("[Service]\nExecStart=/bin/true\n") is None


def test_rendering_is_deterministic_and_profiles_hash_differently() -> None:
    inv = load_inventory(EXAMPLE)
    assert render_unit(inv, "glm5", "baseline") == render_unit(load_inventory(EXAMPLE), "glm5", "baseline")
    assert render_unit(inv, "glm5", "baseline").sha256 != render_unit(inv, "glm5", "candidate").sha256


def test_optional_directives() -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["deployments"]["qwen35"].update(user="sglang", group="sglang", working_directory="/srv/sglang")
    inv = parse_inventory(yaml.safe_dump(data, sort_keys=False))
    text = render_unit(inv, "qwen35", "baseline").text
    assert "\nUser=sglang\nGroup=sglang\nWorkingDirectory=/srv/sglang\n" in text
    assert "EnvironmentFile" not in text

"""run_preflight end to end on inventories, with the host and the interpreter scripted.

Flag tables are the ones extracted from the real wheels (shipped JSON); the host facts are what NVML,
the filesystem and the port would say.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from deployctl.cli import main
from deployctl.errors import InputError
from deployctl.inventory.model import Inventory, parse_inventory
from deployctl.preflight import PreflightReport, run_preflight
from deployctl.preflight.flagtable import shipped_table
from deployctl.preflight.run import close_options
from deployctl.preflight.hostfacts import GpuFact, HostFacts, ProbeRequest
from deployctl.preflight.installed import InstalledSglang

REPO = Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data" / "preflight"
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GOOD_HOST = HostFacts(
    gpus=tuple(GpuFact(RTX, "sm120", 96.0) for _ in range(8)), python_executable=True, cuda_home_exists=True,
    port_state="free", port_holder=None, disk_free_bytes=(("/var/lib/deployctl", 50 * 2**30),),
)


def glm5_inventory() -> Inventory:
    return parse_inventory((DATA / "glm5-local.yaml").read_text().replace("@PYTHON@", sys.executable))


def check(inv: Inventory, deployment: str, profile: str, *, version: str | None = "0.5.10",
          host: HostFacts = GOOD_HOST, probes: list[ProbeRequest] | None = None) -> PreflightReport:
    def host_probe(request: ProbeRequest) -> HostFacts:
        if probes is not None:
            probes.append(request)
        return host

    def interpreter(python: str, env: dict[str, str]) -> InstalledSglang:
        return InstalledSglang(python, (3, 11, 7), version, Path("/nonexistent") if version else None)

    return run_preflight(inv, deployment, profile, host_probe=host_probe, interpreter_probe=interpreter,
                         table_loader=lambda installed: shipped_table(installed.sglang_version))


def by_code(report: PreflightReport, code: str):
    return [f for f in report.findings if f.code == code]


def test_glm5_baseline_on_0_5_10_passes_even_strict() -> None:
    report = check(glm5_inventory(), "glm5", "baseline")
    assert report.errors == [] and report.warnings == []
    assert not report.refuses(strict=True)
    assert report.sglang_version == "0.5.10"


def test_glm5_candidate_warns_about_allreduce_fusion_on_sm120_with_its_source() -> None:
    report = check(glm5_inventory(), "glm5", "candidate")
    (warn,) = report.warnings
    assert warn.code == "catalogue:ar-fusion-no-effect"
    assert "--enable-flashinfer-allreduce-fusion" in warn.message and "SM120" in warn.message
    assert "layers/communicator.py:91-102" in warn.source
    assert not report.refuses() and report.refuses(strict=True)  # a warning refuses only under --strict


def test_glm5_candidate_on_0_5_23_is_refused_naming_the_renamed_flags() -> None:
    report = check(glm5_inventory(), "glm5", "candidate", version="0.5.23")
    renamed = {f.message.split()[0]: f for f in by_code(report, "flag-renamed")}
    assert set(renamed) == {"--nsa-decode-backend", "--nsa-prefill-backend"}
    assert renamed["--nsa-decode-backend"].hint == "use --dsa-decode-backend"
    assert "sglang serve: error: unrecognized arguments: --nsa-decode-backend trtllm" in renamed[
        "--nsa-decode-backend"].message
    assert by_code(report, "catalogue:ar-fusion-startup-failure")[0].level == "ERROR"
    assert {f.message.split(":")[0] for f in by_code(report, "flag-deprecated")} >= {
        "--disable-cuda-graph", "--enable-flashinfer-allreduce-fusion"}
    assert report.refuses()


def test_piecewise_flag_on_0_5_23_and_0_5_9() -> None:
    inv = glm5_inventory()
    new = check(inv, "glm5", "fused-moe", version="0.5.23")
    assert any(f.message.startswith("--disable-piecewise-cuda-graph is not a flag of SGLang 0.5.23") and
               f.hint == "use --cuda-graph-backend-prefill disabled" for f in new.errors)
    old = check(inv, "glm5", "fused-moe", version="0.5.9")
    unknown = sorted(f.message.split()[0] for f in by_code(old, "flag-unknown"))
    assert unknown == ["--disable-piecewise-cuda-graph", "--enable-fused-moe-sum-all-reduce"]
    assert all("added in 0.5.10" in f.message for f in by_code(old, "flag-unknown"))
    assert {f.hint for f in by_code(old, "flag-unknown")} == {
        "remove --disable-piecewise-cuda-graph", "remove --enable-fused-moe-sum-all-reduce"}
    assert "`launch_server.py: error: unrecognized arguments: --enable-fused-moe-sum-all-reduce " \
           "--disable-piecewise-cuda-graph`" in by_code(old, "flag-unknown")[0].message
    fine = check(inv, "glm5", "fused-moe", version="0.5.10")
    assert fine.errors == []
    assert [f.code for f in fine.warnings] == ["catalogue:fused-moe-sum-not-triton"]


def test_host_facts_that_refuse() -> None:
    inv = glm5_inventory()
    four_hopper = replace(GOOD_HOST, gpus=tuple(GpuFact("NVIDIA H100 80GB HBM3", "sm90") for _ in range(4)))
    report = check(inv, "glm5", "baseline", host=four_hopper)
    assert {f.code for f in report.errors} == {"host-gpu-count", "host-gpu-model", "host-gpu-compute-capability"}
    busy = replace(GOOD_HOST, port_state="held_by_other", port_holder="pid 42 (nginx)")
    assert "pid 42 (nginx)" in by_code(check(inv, "glm5", "baseline", host=busy), "host-port")[0].message
    own = replace(GOOD_HOST, port_state="held_by_unit", port_holder="pid 7 (python3)")
    assert by_code(check(inv, "glm5", "baseline", host=own), "host-port")[0].level == "INFO"
    no_cuda = replace(GOOD_HOST, cuda_home_exists=False, disk_free_bytes=(("/var/lib/deployctl", 10 * 2**20),))
    assert {f.code for f in check(inv, "glm5", "baseline", host=no_cuda).errors} == {"host-cuda-home", "host-disk"}
    no_nvml = replace(GOOD_HOST, gpus=None)
    assert [f.code for f in check(inv, "glm5", "baseline", host=no_nvml).warnings] == ["host-gpu-unverified"]


def test_the_probe_is_asked_about_the_units_port_and_interpreter() -> None:
    probes: list[ProbeRequest] = []
    check(glm5_inventory(), "glm5", "baseline", probes=probes)
    (request,) = probes
    assert (request.python, request.port, request.unit, request.cuda_home) == (
        sys.executable, 8000, "sglang-glm5.service", "/usr/local/cuda-12.8")


def test_missing_or_broken_sglang_is_an_error() -> None:
    missing = check(glm5_inventory(), "glm5", "baseline", version=None)
    assert [f.code for f in missing.errors] == ["sglang-missing"]

    def broken(python: str, env: dict[str, str]) -> InstalledSglang:
        raise InputError(f"the deployment's interpreter {python} does not exist")

    report = run_preflight(glm5_inventory(), "glm5", "baseline", host_probe=lambda r: GOOD_HOST,
                           interpreter_probe=broken)
    assert [f.code for f in report.errors] == ["sglang-probe"]


def sim_inventory() -> Inventory:
    return parse_inventory((DATA / "sim.yaml").read_text())


def test_simulated_host_uses_the_simulated_versions_flag_table() -> None:
    inv = sim_inventory()
    default = check(inv, "qwen35", "candidate")
    assert default.sglang_version == "0.5.10" and default.errors == []
    assert "catalogue:ar-fusion-no-effect" in {f.code for f in default.warnings}
    assert {"catalogue:spec-max-running-requests-48", "catalogue:spec-disables-piecewise"} <= {
        f.code for f in default.infos}
    old = check(inv, "qwen35", "on-059")
    assert [f.message.split()[0] for f in old.errors] == ["--enable-fused-moe-sum-all-reduce"]
    new = check(inv, "qwen35", "on-0523")
    (ambiguous,) = by_code(new, "flag-ambiguous")
    assert "could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" in ambiguous.message
    assert ambiguous.hint.startswith("use --cuda-graph-max-bs-decode")
    unknown = check(inv, "qwen35", "on-unknown-version")
    assert [f.code for f in unknown.warnings] == ["flags-unchecked"]


def test_simulated_host_skips_the_gpu_comparison() -> None:
    report = check(sim_inventory(), "qwen35", "baseline", host=replace(GOOD_HOST, gpus=None))
    assert not [f for f in report.findings if f.code.startswith("host-gpu")]


def test_remote_host_is_not_probed() -> None:
    inv = parse_inventory((REPO / "inventory" / "example.yaml").read_text())
    probes: list[ProbeRequest] = []
    report = check(inv, "glm5", "candidate", probes=probes)
    assert probes == []
    assert [f.code for f in report.warnings] == ["host-remote", "catalogue:ar-fusion-no-effect"]


def test_check_verb_on_the_example_inventory(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "glm5", "--profile", "candidate", "-i", str(REPO / "inventory" / "example.yaml")]
    assert main([*args, "--strict"]) == 3
    out = capsys.readouterr()
    assert "WARN  catalogue:ar-fusion-no-effect: --enable-flashinfer-allreduce-fusion has no effect on SM120 as a fusion" in out.out
    assert "source: sglang-flag-facts.md" in out.out
    assert "--strict" in out.err
    assert main(args) == 0  # the rule of promote: warnings are shown, only errors refuse
    capsys.readouterr()
    assert main([*args, "--force"]) == 0  # what used to proceed past warnings still does
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"error": 0, "warn": 2, "info": len(data["findings"]) - 2}
    assert data["findings"][1]["source"].startswith("sglang-flag-facts.md")


def test_sglang_environment_variables_the_version_does_not_declare() -> None:
    text = (DATA / "sim.yaml").read_text().replace(
        "      on-unknown-version:",
        "      env-typo:\n        extends: baseline\n        env:\n          SGLANG_ENABLE_JIT_DEEPGEM: 0\n"
        "          SGLANG_ENABLE_SPEC_V2: 1\n          SGLANG_SIM_VERSION: 0.5.23\n"
        "      on-unknown-version:")
    report = check(parse_inventory(text), "qwen35", "env-typo")
    (typo,) = [f for f in report.warnings if f.message.startswith("SGLANG_ENABLE_JIT_DEEPGEM is not among")]
    assert typo.code == "env-unknown" and "SGLANG_ENABLE_JIT_DEEPGEMM" in typo.hint
    gone = [f for f in report.findings if f.code == "env-unknown" and f.message.startswith("SGLANG_ENABLE_SPEC_V2")]
    assert gone and "catalogue:env-spec-v2-removed" in {f.code for f in report.warnings}
    assert not [f for f in report.findings if "SGLANG_SIM_VERSION" in f.message]


def test_a_typo_in_a_flag_is_an_error_with_did_you_mean_when_the_hosts_sglang_is_unknown() -> None:
    """example.yaml's hosts are remote: no flag table of their SGLang; the shipped tables still catch a typo,
    and refuse it (issue 44.3: a remote host's check exited 0 with a warning)."""
    text = (REPO / "inventory" / "example.yaml").read_text()
    assert "enable-flashinfer-allreduce-fusion: true" in text
    inv = parse_inventory(text.replace("enable-flashinfer-allreduce-fusion: true", "enable-flashinfer-allreduce-fuson: true", 1))
    report = check(inv, "glm5", "candidate")
    assert report.sglang_version is None
    (typo,) = by_code(report, "flag-unknown-everywhere")
    assert typo.level == "ERROR" and typo.message.startswith("--enable-flashinfer-allreduce-fuson is a flag of none")
    assert report.refuses(strict=False)
    assert typo.hint.startswith("did you mean --enable-flashinfer-allreduce-fusion ")  # the closest first
    assert not by_code(check(parse_inventory(text), "glm5", "candidate"), "flag-unknown-everywhere")  # real flags pass


def test_a_made_up_flag_is_an_error_with_no_far_fetched_suggestion() -> None:
    """--enable-turbo-mode is no flag of any release and close to none: no "did you mean --enable-ep-moe?"."""
    text = (REPO / "inventory" / "example.yaml").read_text()
    inv = parse_inventory(text.replace("enable-flashinfer-allreduce-fusion: true", "enable-turbo-mode: true", 1))
    (made_up,) = by_code(check(inv, "glm5", "candidate"), "flag-unknown-everywhere")
    assert made_up.level == "ERROR" and "did you mean" not in (made_up.hint or "")
    assert made_up.hint == "check the spelling against `python -m sglang.launch_server --help` on the host"


def test_against_the_hosts_own_table_only_a_close_flag_is_suggested() -> None:
    table = shipped_table("0.5.10")
    assert table is not None
    assert close_options("--tp-sze", table.option_strings) == ["--tp-size"]  # not --pp-size, --ep-size
    assert close_options("--enable-turbo-mode", table.option_strings) == []

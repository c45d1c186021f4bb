"""Flag extraction and pre-flight on the real SGLang wheels (0.5.9, 0.5.10, 0.5.23).

The wheels come from the cache tests/support/sglang_wheels.py keeps (scripts/bootstrap fills it). Nothing
is installed: extraction reads the wheel as a zip, and the "SGLang environment" fixtures are bare venvs
whose site-packages hold only the source files extraction reads plus the wheel's ``.dist-info``, which is
all pre-flight looks at. Without network the tests skip, unless CI=true, where they fail.
"""

from __future__ import annotations

import subprocess
import venv
import zipfile
from pathlib import Path

import pytest
from support.sglang_wheels import wheel as _wheel

from deployctl.cli import main
from deployctl.inventory.model import parse_inventory
from deployctl.preflight import run_preflight
from deployctl.preflight.argcheck import check_argv
from deployctl.preflight.extract import extract_flag_table
from deployctl.preflight.flagtable import FlagTable, shipped_table
from deployctl.preflight.hostfacts import GpuFact, HostFacts
from deployctl.preflight.installed import probe_interpreter
from deployctl.preflight.sources import WheelSource

VERSIONS = ("0.5.9", "0.5.10", "0.5.23")
SHIPPED = (*VERSIONS, "0.4.10.post2")  # every version the simulator impersonates
# sglang-flag-facts.md §5: option strings / argparse actions, without argparse's own -h/--help.
COUNTS = {"0.5.9": (341, 331), "0.5.10": (365, 354), "0.5.23": (559, 531)}
REPO = Path(__file__).resolve().parent.parent.parent
GLM5_LOCAL = REPO / "tests" / "data" / "preflight" / "glm5-local.yaml"
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
SM120_HOST = HostFacts(
    gpus=tuple(GpuFact(RTX, "sm120", 96.0) for _ in range(8)), python_executable=True, cuda_home_exists=True,
    port_state="free", port_holder=None, disk_free_bytes=(("/var/lib/deployctl", 50 * 2**30),),
)


@pytest.fixture(scope="module")
def extracted() -> dict[str, tuple[FlagTable, Path, list[str]]]:
    out = {}
    for version in VERSIONS:
        wheel = _wheel(version)
        source = WheelSource(wheel)
        try:
            table = extract_flag_table(source, version)
        finally:
            source.close()
        out[version] = (table, wheel, sorted(set(source.read_paths)))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_flag_counts_match_the_facts(extracted, version: str) -> None:
    table = extracted[version][0]
    assert (len(table.option_strings) - 2, len(table.flags) - 1) == COUNTS[version]


@pytest.mark.parametrize("version", SHIPPED)
def test_shipped_flag_table_is_what_the_wheel_yields(version: str) -> None:
    # The JSON the simulated hosts are checked against must stay regenerable from the wheel.
    source = WheelSource(_wheel(version))
    try:
        assert shipped_table(version) == extract_flag_table(source, version)
    finally:
        source.close()


def test_facts_about_individual_flags(extracted) -> None:
    t59, t510, t523 = (extracted[v][0] for v in VERSIONS)
    assert "trtllm" in t59.exact("--nsa-decode-backend").choices
    for flag in ("--enable-fused-moe-sum-all-reduce", "--disable-piecewise-cuda-graph"):
        assert t59.exact(flag) is None and t510.exact(flag) is not None
    assert t523.exact("--nsa-decode-backend") is None and "trtllm" in t523.exact("--dsa-decode-backend").choices
    assert t523.exact("--disable-piecewise-cuda-graph") is None
    assert t523.exact("--enable-flashinfer-allreduce-fusion").deprecated == "--flashinfer-allreduce-fusion-backend=auto"
    assert t523.exact("--disable-cuda-graph").deprecated is not None
    assert t523.prefix_matches("--cuda-graph-max-bs") == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]
    for table in (t59, t510, t523):
        assert table.resolve("--tp").name in ("--tensor-parallel-size", "--tp-size")
        assert "glm47" in table.exact("--tool-call-parser").choices


def _sglang_env(tmp_path: Path, version: str, extracted) -> Path:
    """A venv whose site-packages holds the SGLang source files extraction reads and the dist-info."""
    table, wheel, read_paths = extracted[version]
    root = tmp_path / f"sglang-{version}"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with zipfile.ZipFile(wheel) as zf:
        wanted = set(read_paths) | {"sglang/__init__.py"}
        wanted |= {n for n in zf.namelist() if ".dist-info/" in n and not n.endswith(("RECORD", "/"))}
        for name in sorted(wanted):
            target = Path(purelib) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
    return python


def _inventory(python: Path):
    return parse_inventory(GLM5_LOCAL.read_text().replace("@PYTHON@", str(python)))


def test_probe_reads_the_version_without_importing_sglang(tmp_path: Path, extracted) -> None:
    python = _sglang_env(tmp_path, "0.5.23", extracted)
    installed = probe_interpreter(str(python))
    assert installed.sglang_version == "0.5.23"
    assert installed.source_root is not None and (installed.source_root / "sglang" / "srt" / "server_args.py").is_file()
    # torch is not there, so importing sglang would fail: the probe must not have tried.
    assert subprocess.run([str(python), "-c", "import sglang"], capture_output=True).returncode != 0


def test_glm5_candidate_against_real_environments(tmp_path: Path, extracted) -> None:
    def preflight(version: str, profile: str):
        inv = _inventory(_sglang_env(tmp_path, version, extracted))
        return run_preflight(inv, "glm5", profile, host_probe=lambda request: SM120_HOST)

    ok = preflight("0.5.10", "candidate")
    assert ok.sglang_version == "0.5.10" and ok.errors == []
    assert [f.code for f in ok.warnings] == ["catalogue:ar-fusion-no-effect"]

    new = preflight("0.5.23", "fused-moe")
    named = {f.message.split()[0] for f in new.errors if f.code in ("flag-renamed", "flag-unknown")}
    assert named == {"--nsa-decode-backend", "--nsa-prefill-backend", "--disable-piecewise-cuda-graph"}
    assert all("renamed" in f.message for f in new.errors if f.code == "flag-renamed")

    old = preflight("0.5.9", "fused-moe")
    assert sorted(f.message.split()[0] for f in old.errors) == [
        "--disable-piecewise-cuda-graph", "--enable-fused-moe-sum-all-reduce"]


def test_check_verb_refuses_the_candidate_on_0_5_23(tmp_path: Path, extracted,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    python = _sglang_env(tmp_path, "0.5.23", extracted)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(GLM5_LOCAL.read_text().replace("@PYTHON@", str(python)))
    assert main(["check", "glm5", "--profile", "candidate", "-i", str(inventory)]) == 3
    out = capsys.readouterr().out
    assert "SGLang 0.5.23" in out
    assert "ERROR flag-renamed: --nsa-decode-backend is not a flag of SGLang 0.5.23" in out
    assert "ERROR flag-renamed: --nsa-prefill-backend is not a flag of SGLang 0.5.23" in out
    assert "fix: use --dsa-decode-backend" in out


def test_extracted_check_agrees_with_the_shipped_one_on_the_glm5_command(extracted) -> None:
    argv = ["--model-path", "m", "--nsa-decode-backend", "trtllm", "--tp", "8", "--cuda-graph-max-bs", "8"]
    for version in VERSIONS:
        assert check_argv(extracted[version][0], argv) == check_argv(shipped_table(version), argv)

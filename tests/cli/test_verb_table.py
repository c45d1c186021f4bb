"""Every verb × {--help, --json, a bad argument, no system bus / not root}: the exit code, valid JSON on
stdout under --json, and never a traceback. Runs ``deployctl.cli.main`` in-process (fast), except where
the process itself is the point (a closed or full stdout, another user)."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.unprivileged import AsNobody
from testpaths import DATA, REPO

from deployctl import commands
from deployctl.cli import main
from deployctl.errors import EXIT_CODES, ExitCode

EXAMPLE = str(REPO / "inventory" / "example.yaml")
LOG = str(DATA / "logs" / "01-qwen35-122b-tp4-mtp-baseline-v0.5.10.log")
VERBS = sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(commands.__path__)
               if not m.name.startswith("_") and m.name != "options" and m.name != "output")
# The verbs that name a deployment, and how (the alias column: the first positional also works).
DEPLOYMENT_VERBS = {"abort", "attach", "recover", "bench", "bisect", "canary", "check", "diff", "history", "promote", "render",
                    "restart", "rollback",
                    "startup-diff", "startup-report", "status"}


@pytest.fixture
def no_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No system bus, a private state directory and unit directories: nothing on this host is touched."""
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/no-such-bus")
    for name in ("DEPLOYCTL_UNIT_DIR", "DEPLOYCTL_RUNTIME_UNIT_DIR", "DEPLOYCTL_BACKUP_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("DEPLOYCTL_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    monkeypatch.setenv("DEPLOYCTL_INVENTORY", EXAMPLE)
    return tmp_path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out, err
    return code, out, err


def test_the_table_covers_every_verb() -> None:
    assert set(VERBS) == set(JSON_CASES), "a new verb needs a row in JSON_CASES"


def test_the_top_help_lists_every_exit_code_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    for number, meaning in EXIT_CODES:
        assert out.count(f"{number:>3}  {meaning}") == 1


@pytest.mark.parametrize("verb", VERBS)
def test_help_points_at_the_exit_codes_and_says_how_to_name_the_deployment(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([verb, "--help"], capsys)
    assert code == 0
    assert f"deployctl {verb}" in out and "exit codes: `deployctl --help` or `man deployctl`" in out
    assert "rollback failed: manual action needed" not in out  # the table is not repeated in every verb
    for option in ("--inventory", "--state-dir", "--json", "--no-color", "--verbose"):
        assert option in out
    if verb in DEPLOYMENT_VERBS:  # -d everywhere, and the help says whether a positional alias works
        assert "-d DEPLOYMENT, --deployment DEPLOYMENT" in out
        flat = " ".join(out.split())
        assert any(words in flat for words in ("same as -d DEPLOYMENT (an alias)", "first of two positional arguments",
                                               "first of three positional arguments", "-d only: the positional"))


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_bad_argument_exits_2(verb: str, as_json: bool, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([verb, "--no-such-option", *(["--json"] if as_json else [])], capsys)
    assert code == ExitCode.BAD_INPUT
    if as_json:
        error = json.loads(out)
        assert error["exit_code"] == 2 and error["hint"].startswith(f"usage: deployctl {verb}")
    else:
        assert err.startswith("error: ") and f"hint: usage: deployctl {verb}" in err


# verb → (arguments after the verb, expected exit code) with --json, no system bus, a fresh state directory.
JSON_CASES: dict[str, tuple[list[str], int]] = {
    "validate": ([], ExitCode.OK),
    "render": (["glm5"], ExitCode.OK),
    "diff": (["glm5", "baseline", "baseline", "--unit"], ExitCode.OK),
    "check": (["-d", "glm5", "--profile", "nope"], ExitCode.BAD_INPUT),
    "judge": (["/nonexistent/a.json", "/nonexistent/b.json"], ExitCode.BAD_INPUT),
    "bench": (["--url", "http://127.0.0.1:9", "-c", "1", "--requests", "1", "--warmup", "0"], ExitCode.ENVIRONMENT),
    "startup-report": ([LOG], ExitCode.OK),
    "startup-diff": ([LOG, LOG], ExitCode.OK),
    "history": ([], ExitCode.OK),
    "show": (["1"], ExitCode.BAD_INPUT),
    "status": (["glm5"], ExitCode.ENVIRONMENT),
    "restart": (["glm5", "--profile", "baseline"], ExitCode.ENVIRONMENT),
    "promote": (["candidate", "-d", "glm5", "--skip-preflight"], ExitCode.ENVIRONMENT),
    "bisect": (["candidate", "-d", "glm5", "--skip-preflight"], ExitCode.ENVIRONMENT),
    "rollback": (["-d", "glm5"], ExitCode.ENVIRONMENT),
    "abort": (["glm5"], ExitCode.OK),
    "demo": ([], ExitCode.ENVIRONMENT),  # not root (below)
    "canary": (["glm5"], ExitCode.ENVIRONMENT),
    "report": (["1"], ExitCode.BAD_INPUT),  # no ledger yet
    "attach": (["glm5"], ExitCode.BAD_INPUT),  # no operation was started in a unit
    "recover": (["glm5"], ExitCode.OK),  # nothing unfinished: nothing to do, no bus needed
    "polkit-rule": ([], ExitCode.OK),
}


@pytest.mark.parametrize("verb", VERBS)
def test_json_on_every_verb_is_one_json_document(
    verb: str, no_bus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if verb == "demo":
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args, expected = JSON_CASES[verb]
    # --json after the verb's arguments here, before the verb in the next test: both are the same option.
    code, out, _ = run([verb, *args, "--json"], capsys)
    assert code == expected, out
    document = json.loads(out)
    if expected not in (ExitCode.OK, ExitCode.PREFLIGHT_REFUSED):
        assert set(document) == {"error", "hint", "exit_code"} and document["exit_code"] == expected


def test_global_options_work_before_and_after_the_verb(capsys: pytest.CaptureFixture[str]) -> None:
    before = run(["--json", "-i", EXAMPLE, "render", "-d", "qwen35"], capsys)
    after = run(["render", "qwen35", "-i", EXAMPLE, "--json"], capsys)
    assert before == after and json.loads(before[1])["unit"] == "sglang-qwen35.service"
    code, _, err = run(["startup-report", LOG, "-v"], capsys)
    assert code == 0


def test_the_positional_alias_and_d_must_agree(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["render", "glm5", "-d", "qwen35", "-i", EXAMPLE], capsys)
    assert code == ExitCode.BAD_INPUT and "two deployments named" in err
    for words in (["glm5", "candidate"], ["candidate", "-d", "glm5"], ["-d", "glm5", "--profile", "candidate"]):
        code, out, _ = run(["promote", *words, "--dry-run", "--skip-preflight", "-i", EXAMPLE, "--json"], capsys)
        assert code == 0 and (json.loads(out)["deployment"], json.loads(out)["profile"]) == ("glm5", "candidate")
    code, _, err = run(["promote", "baseline", "-d", "glm5", "-p", "candidate", "--dry-run", "-i", EXAMPLE], capsys)
    assert code == ExitCode.BAD_INPUT and "two profiles named" in err


def test_promote_dry_run_tells_the_whole_plan(no_bus: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, out, _ = run(["promote", "candidate", "-d", "glm5", "--dry-run"], capsys)
    assert code == ExitCode.OK  # glm5-host is not this machine: pre-flight warns, and a warning does not refuse
    assert "KV cache tokens (max_total_num_tokens) may drop ≤ 25 %" in out
    assert "WARN  host-remote" in out and "pre-flight would let it proceed with the warnings above" in out
    assert "the real run needs root" in out
    assert "host glm5-host is remote (glm5-host.lan)" in out
    code, out, _ = run(["promote", "candidate", "-d", "glm5", "--dry-run", "--json"], capsys)
    plan = json.loads(out)
    assert code == 0 and not plan["preflight_would_refuse"] and plan["needs_root"] and plan["remote_host"] == "glm5-host.lan"
    assert any("KV cache" in gate for gate in plan["startup_gates"])
    assert not list((no_bus / "state").iterdir())  # a dry run writes nothing


def test_promote_dry_run_shows_what_pre_flight_would_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = tmp_path / "inv.yaml"  # a simulated host: its flag table is known, so a misspelt flag is an ERROR
    inventory.write_text((REPO / "inventory" / "demo.yaml").read_text().replace(
        "enable-flashinfer-allreduce-fusion: true", "enable-flashinfer-allreduce-fusoin: true"))
    code, out, _ = run(["promote", "candidate", "-d", "glm5-sim", "--dry-run", "-i", str(inventory),
                        "--state-dir", str(tmp_path)], capsys)
    assert code == ExitCode.PREFLIGHT_REFUSED and "pre-flight would REFUSE this promote (exit 3)" in out
    assert "ERROR" in out and "fusoin" in out


@pytest.mark.parametrize("verb", ["history", "show", "status"])
def test_read_only_verbs_on_a_missing_state_dir_say_so_and_create_nothing(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "never-made"
    args = {"history": [], "show": ["1"], "status": ["glm5"]}[verb]
    code, _, err = run([verb, *args, "-i", EXAMPLE, "--state-dir", str(missing)], capsys)
    assert code == ExitCode.BAD_INPUT and f"the state directory {missing} does not exist" in err
    assert not missing.exists()


def test_history_on_an_empty_state_dir_creates_no_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["history", "--state-dir", str(tmp_path), "--json"], capsys)[:2] == (0, "[]\n")
    assert list(tmp_path.iterdir()) == []


def test_render_into_a_directory_that_does_not_exist_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "units"
    assert run(["render", "-d", "glm5", "-i", EXAMPLE, "-o", f"{target}/"], capsys)[0] == 0
    assert (target / "sglang-glm5.service").read_text().count("[Unit]") == 1


def test_diff_unit_of_identical_profiles_says_no_differences(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["diff", "glm5", "baseline", "baseline", "--unit", "-i", EXAMPLE], capsys)
    assert code == 0 and out == "glm5: baseline -> baseline: no differences\n"


def _deployctl(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deployctl", *args], text=True, capture_output=True,
                          timeout=60, **kwargs)  # type: ignore[call-overload]


def test_a_full_stdout_is_exit_5_without_a_traceback() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "deployctl", "render", "glm5", "-i", EXAMPLE, "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == ExitCode.ENVIRONMENT, done.stderr
    assert "no space left" in done.stderr and "Traceback" not in done.stderr


def test_a_closed_stdout_is_not_an_error() -> None:
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "deployctl", "validate", "-i", EXAMPLE, "--json"],
                              stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(writer)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root (CI runs as root)")
def test_not_root_is_exit_5(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)  # root's, as /var/lib/deployctl is
    # AsNobody: the checkout may sit in a 0700 directory (a clone under /root or in `mktemp -d`).
    with AsNobody(REPO, state) as nobody:
        done = nobody.python("-m", "deployctl", "restart", "glm5", "--profile", "baseline", "-i", nobody.path(EXAMPLE),
                             "--state-dir", nobody.path(state), "--json")
    assert done.returncode == ExitCode.ENVIRONMENT, done.stdout + done.stderr
    assert json.loads(done.stdout)["exit_code"] == ExitCode.ENVIRONMENT and "Traceback" not in done.stderr


def test_version_with_json_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version", "--json"], capsys)
    assert code == 0 and json.loads(out)["version"]


def test_check_refusing_under_json_carries_error_and_exit_code(no_bus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["check", "-d", "glm5", "--strict", "--json"], capsys)  # the remote host's warning
    document = json.loads(out)
    assert code == document["exit_code"] == ExitCode.PREFLIGHT_REFUSED
    assert "on warnings (--strict)" in document["error"] and document["findings"]
    assert err == ""  # issue 44.10: not also a text error on stderr


def test_promote_dry_run_refusing_under_json_carries_error_and_exit_code(
        no_bus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text(Path(EXAMPLE).read_text().replace("enable-flashinfer-allreduce-fusion: true",
                                                      "enable-flashinfer-allreduce-fuson: true", 1))
    code, out, err = run(["promote", "glm5", "candidate", "--dry-run", "--json", "-i", str(typo)], capsys)
    document = json.loads(out)
    assert code == document["exit_code"] == ExitCode.PREFLIGHT_REFUSED and document["preflight_would_refuse"]
    assert document["error"].startswith("pre-flight refuses glm5 (candidate): 1 error(s)") and document["hint"]
    assert err == ""


@pytest.mark.parametrize("argv", [["check", "glm5", "candidat"], ["promote", "glm5", "candidat", "--dry-run"],
                                  ["diff", "glm5", "baseline", "candidat"]])
def test_a_profile_typo_gets_a_hint_as_a_deployment_typo_does(
        argv: list[str], no_bus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*argv, "--json"], capsys)
    document = json.loads(out)
    assert code == document["exit_code"] == ExitCode.BAD_INPUT
    assert document["hint"] == "did you mean 'candidate'?"
    code, out, _ = run(["check", "glm5", "nightly", "--json"], capsys)
    assert json.loads(out)["hint"] == "`deployctl validate` lists each deployment's profiles"


def test_exit_1_is_only_diffs_they_differ_and_a_bug_has_its_own_code(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert [code for code, _ in EXIT_CODES if code == 1] == [ExitCode.DIFFERENT]
    assert main(["diff", "glm5", "baseline", "candidate", "-i", EXAMPLE, "-q"]) == 1
    from deployctl.commands import validate

    def broken(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(validate, "run", broken)
    assert main(["validate", "-i", EXAMPLE, "--json"]) == ExitCode.BUG == 70
    out, err = capsys.readouterr()
    assert json.loads(out)["exit_code"] == 70 and "Traceback" in err


def test_validate_json_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "inv.yaml"
    bad.write_text(Path(EXAMPLE).read_text().replace("tp: 8", "tp: eight").replace("port: 8000", "port: -1", 1))
    code, out, _ = run(["validate", "-i", str(bad), "--json"], capsys)
    document = json.loads(out)
    assert code == document["exit_code"] == ExitCode.BAD_INPUT
    assert len(document["problems"]) >= 2 and all(p.startswith(f"{bad}:") for p in document["problems"])


def test_a_remote_option_after_the_verb_says_where_it_goes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["status", "glm5", "-H", "gpu-node-3", "-i", EXAMPLE], capsys)
    assert code == ExitCode.BAD_INPUT
    assert "hint: -H goes before the verb: deployctl -H [USER@]HOST status" in err


def test_a_misspelt_sglang_flag_fails_validate_and_check_on_a_laptop(
        no_bus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 44.3: validate said `ok` (exit 0) and check exited 0 for a remote host on a flag no release has."""
    typo = tmp_path / "typo.yaml"
    typo.write_text(Path(EXAMPLE).read_text().replace("mem-fraction-static:", "mem-fraction-statc:", 1)
                    .replace("enable-flashinfer-allreduce-fusion: true", "enable-turbo-mode: true", 1))
    code, out, err = run(["validate", "-i", str(typo)], capsys)
    assert code == ExitCode.BAD_INPUT and not out
    assert "flags.mem-fraction-statc: --mem-fraction-statc is a flag of none" in err
    assert "did you mean --mem-fraction-static?" in err
    (turbo,) = [line for line in err.splitlines() if ".flags.enable-turbo-mode:" in line]
    assert "did you mean" not in turbo
    code, out, _ = run(["check", "glm5", "candidate", "-i", str(typo), "--json"], capsys)
    document = json.loads(out)
    assert code == document["exit_code"] == ExitCode.PREFLIGHT_REFUSED
    assert {"flag-unknown-everywhere"} <= {f["code"] for f in document["findings"] if f["level"] == "ERROR"}


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root (CI runs as root)")
def test_promote_as_a_normal_user_says_it_needs_root_not_where_the_lock_is(tmp_path: Path) -> None:
    """Issue 44.5: the hint was `DEPLOYCTL_LOCK_DIR moves the lock directory`; the real run needs root."""
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    with AsNobody(REPO, state) as nobody:
        done = nobody.python("-m", "deployctl", "promote", "glm5", "candidate", "-i", nobody.path(EXAMPLE),
                             "--state-dir", nobody.path(state), "--json")
    document = json.loads(done.stdout)
    assert done.returncode == document["exit_code"] == ExitCode.ENVIRONMENT, done.stdout + done.stderr
    assert document["error"].startswith("deployctl promote needs root: it installs the unit")
    assert "as nobody it cannot even take the lock" in document["error"]
    assert document["hint"].startswith("run it as root (sudo deployctl promote …)")
    assert "DEPLOYCTL_LOCK_DIR" not in done.stdout + done.stderr
    assert not list(state.iterdir())

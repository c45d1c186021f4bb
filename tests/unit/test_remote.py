"""The pure parts of remote operation: transient unit properties, the dead-man's bound, ssh argv and errors,
what `-H` forwards, and the runner's dead-man hook (scripted adapters)."""

from __future__ import annotations

import io
import re
from dataclasses import replace

import pytest
from support.promote import memory_ledger, plan
from support.runner_fakes import FakeJudge, adapters

from deployctl.adapters.ssh import Target, compatible, connection_error, parse_target, ssh_argv
from deployctl.adapters.transient import (
    TransientService,
    dead_man_units,
    escape_unit_part,
    operation_unit,
    timer_properties,
)
from deployctl.console.remote import remote_argv, strip_options
from deployctl.console.upload import upload_directory
from deployctl.errors import ExitCode, InputError, UsageError
from deployctl.inventory.policy import Policy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.operations.operation import (
    RESULT_ENV,
    WORKER_ENV,
    OperationRecord,
    _PriorityPrefix,
    choose_operation,
    unit_environment,
)
from deployctl.live.runner import Runner
from deployctl.decisions import machine as m
from deployctl.decisions.dead_man import MARGIN_S, Lease, LeaseAction, check_s, describe, judge_alive, stall_s
from deployctl.decisions.evidence import JudgeResult

# --- transient units ------------------------------------------------------------------------------


def test_unit_names_are_fixed_per_verb_and_deployment_and_escaped():
    assert operation_unit("promote", "glm5-sim") == "deployctl-promote-glm5-sim.service"
    assert dead_man_units("glm5") == ("deployctl-deadman-glm5.timer", "deployctl-deadman-glm5.service")
    assert escape_unit_part("a b/ü") == "a\\x20b\\x2f\\xc3\\xbc"
    assert escape_unit_part(".hidden") == "\\x2ehidden"
    with pytest.raises(ValueError):
        operation_unit("promote; rm", "x")


def test_service_properties_have_systemd_run_types_and_journal_stdio():
    props = {k: (sig, v) for k, sig, v in TransientService(
        argv=["/usr/bin/python3", "-m", "deployctl", "promote", "c"], description="d",
        environment={"DEPLOYCTL_STATE_DIR": "/s"}, working_directory="/w", stop_timeout_s=90).properties()}
    assert props["ExecStart"] == ("a(sasb)", [("/usr/bin/python3", ["/usr/bin/python3", "-m", "deployctl", "promote", "c"], False)])
    assert props["Type"] == ("s", "exec") and props["CollectMode"] == ("s", "inactive-or-failed")
    assert props["StandardOutput"] == ("s", "journal") and props["StandardInput"] == ("s", "null")
    assert "StandardError" not in props  # inherit: one stream, lines in order
    assert props["Environment"] == ("as", ["DEPLOYCTL_STATE_DIR=/s"])
    assert props["TimeoutStopUSec"] == ("t", 90_000_000) and props["WorkingDirectory"] == ("s", "/w")
    assert "ExecStopPost" not in props  # nothing of the caller's to remove


def test_a_service_removes_the_directory_it_owns_however_it_stopped():
    props = {k: (sig, v) for k, sig, v in TransientService(
        argv=["/bin/x"], description="d", remove_after="/tmp/deployctl-inventory.Ab12Cd").properties()}
    # ExecStopPost runs after a SIGKILL too; "-" (ignore failure): the unit's own result stays its program's
    assert props["ExecStopPost"] == ("a(sasb)", [("/bin/rm", ["rm", "-rf", "--", "/tmp/deployctl-inventory.Ab12Cd"],
                                                  True)])


@pytest.mark.parametrize("service", [
    TransientService(argv=["deployctl"], description="relative program"),
    TransientService(argv=["/bin/x"], description="d", environment={"BAD KEY": "v"}),
    TransientService(argv=["/bin/x"], description="d", environment={"K": "two\nlines"}),
])
def test_service_properties_refuse_what_systemd_would_misread(service):
    with pytest.raises(ValueError):
        service.properties()


def test_timer_is_monotonic_on_active_in_microseconds():
    props = {k: (sig, v) for k, sig, v in timer_properties("t", 25.5)}
    assert props["TimersMonotonic"] == ("a(st)", [("OnActiveSec", 25_500_000)])
    again = {k: (sig, v) for k, sig, v in timer_properties("t", 30, every_s=30)}
    assert again["TimersMonotonic"] == ("a(st)", [("OnActiveSec", 30_000_000), ("OnUnitActiveSec", 30_000_000)])
    assert props["AccuracyUSec"] == ("t", 1_000_000)  # not systemd's default minute late
    assert props["RemainAfterElapse"] == ("b", False)
    with pytest.raises(ValueError):
        timer_properties("t", 0)


def test_unit_environment_passes_locations_and_identity_not_secrets():
    env = unit_environment({"DEPLOYCTL_STATE_DIR": "/s", "PATH": "/bin", "SUDO_USER": "ann", "HF_TOKEN": "x",
                            "AWS_SECRET_ACCESS_KEY": "y", RESULT_ENV: "/s/op.exit"}, "u.service")
    assert env == {"DEPLOYCTL_STATE_DIR": "/s", "PATH": "/bin", "SUDO_USER": "ann", WORKER_ENV: "u.service",
                   "PYTHONUNBUFFERED": "1"}


def test_stderr_lines_in_the_unit_carry_the_journal_priority_prefix():
    out = io.StringIO()
    stream = _PriorityPrefix(out, 4)
    stream.write("one\ntw")
    stream.write("o\n\nthree")
    assert out.getvalue() == "<4>one\n<4>two\n<4>\n<4>three"


# --- which operation attach follows -------------------------------------------------------------------


def _op(op_id: str, verb: str, started: float) -> OperationRecord:
    return OperationRecord("glm5", verb, f"deployctl-{verb}-glm5.service", "0" * 32, started, op_id)


def test_attach_follows_the_running_operation_not_a_later_refused_one():
    promote, rollback = _op("p", "promote", 1.0), _op("r", "rollback", 2.0)
    assert choose_operation([promote, rollback], {"p"}, {"r": ExitCode.BUSY}) is promote
    # the promote has ended meanwhile: still not the refused rollback
    assert choose_operation([promote, rollback], set(), {"p": 0, "r": ExitCode.BUSY}) is promote
    # a later rollback that ran (not refused) is the newest: it is the one
    assert choose_operation([promote, rollback], set(), {"p": 0, "r": 0}) is rollback
    # killed before it said (no exit code): still followed, attach reports 31 with the ledger's hint
    assert choose_operation([promote, rollback], set(), {}) is rollback


# --- the dead-man's bound ---------------------------------------------------------------------------


def test_the_stall_bound_is_the_longest_pause_a_healthy_controller_makes_not_the_whole_promote():
    # The example inventory: 30 min startup, 600 s requests. The old bound was every trial's every request
    # at its timeout (15.5 h); between two renewals there is at most one restart or one wave.
    example = Policy.model_validate({"gates": {"startup_timeout_s": 1800}})
    assert stall_s(example) == 1800 + MARGIN_S
    assert stall_s(Policy.model_validate({"gates": {"startup_timeout_s": 10},
                                          "bench": {"request_timeout_s": 300}})) == 300 + MARGIN_S
    assert check_s(example) == 30  # a dead controller's candidate: rolled back within half a minute
    assert "within 30 s" in describe(example) and "no progress for 1860 s" in describe(example)


def test_the_bounds_from_the_policy_win():
    policy = Policy.model_validate({"dead_man_s": 42, "dead_man_check_s": 5})
    assert stall_s(policy) == 42 and check_s(policy) == 5
    for bad in ({"dead_man_s": 0}, {"dead_man_check_s": 0.5}):
        with pytest.raises(ValueError):
            Policy.model_validate(bad)


@pytest.mark.parametrize("idle, verdict", [(0, LeaseAction.WAIT), (99.9, LeaseAction.WAIT), (100, LeaseAction.TERMINATE),
                                           (199, LeaseAction.TERMINATE), (200, LeaseAction.KILL)])
def test_a_live_controller_is_judged_by_how_long_it_made_no_progress(idle, verdict):
    assert judge_alive(Lease(release_id=7, pid=42, renewed=1000.0, stall_s=100), 1000.0 + idle) is verdict


def test_a_live_controller_without_a_lease_is_left_alone():
    assert judge_alive(None, 1e9) is LeaseAction.WAIT


# --- ssh ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, target", [
    ("gpu-3", Target("gpu-3")),
    ("root@gpu-3.lab:2222", Target("gpu-3.lab", "root", 2222)),
    ("ops@[::1]:22", Target("::1", "ops", 22)),
    ("10.0.0.7", Target("10.0.0.7")),
])
def test_targets_parse(text, target):
    assert parse_target(text) == target


@pytest.mark.parametrize("text", ["-oProxyCommand=x", "a@b@c", "host:port", "host:70000", "", "h st"])
def test_bad_targets_are_input_errors(text):
    with pytest.raises(InputError):
        parse_target(text)


def test_ssh_argv_batch_without_a_terminal_and_the_command_as_one_word():
    argv = ssh_argv(Target("h", "root", 2222), "deployctl history", tty=False, batch=True, options=["-i", "k"])
    assert argv == ["ssh", "-T", "-o", "ConnectTimeout=15", "-o", "BatchMode=yes", "-p", "2222", "-l", "root",
                    "-i", "k", "h", "deployctl history"]
    interactive = ssh_argv(Target("h"), "x", tty=True, batch=False)
    assert interactive[:2] == ["ssh", "-t"] and "BatchMode=yes" not in interactive


@pytest.mark.parametrize("stderr, code", [
    ("root@h: Permission denied (publickey).", ExitCode.SSH_REFUSED),
    ("Host key verification failed.", ExitCode.SSH_REFUSED),
    ("ssh: connect to host h port 22: Connection refused", ExitCode.SSH_UNREACHABLE),
    ("ssh: Could not resolve hostname h: Name or service not known", ExitCode.SSH_UNREACHABLE),
    ("", ExitCode.SSH_UNREACHABLE),
])
def test_ssh_failures_are_told_apart(stderr, code):
    error = connection_error(Target("h"), stderr)
    assert error.exit_code == code and error.hint and "\n" not in error.message


def test_versions_are_compatible_within_a_minor_release():
    assert compatible("0.2.0", "0.2.5") and not compatible("0.2.0", "0.3.0") and not compatible("1.0.0", "0.1.0")


# --- what -H forwards ---------------------------------------------------------------------------------


def test_strip_options_removes_every_spelling():
    argv = ["-H", "h", "-v", "--host=h", "-Hh", "promote", "c", "-i", "a.yaml", "--inventory=b.yaml", "-ic.yaml",
            "--remote-inventory", "-d", "x"]
    assert strip_options(argv, {"-H": True, "--host": True, "--remote-inventory": False, "-i": True,
                                "--inventory": True}) == ["-v", "promote", "c", "-d", "x"]


def test_remote_argv_sends_the_uploaded_inventory_and_runs_long_verbs_in_a_unit():
    argv = ["-H", "root@h", "promote", "neutral", "-d", "glm5", "-i", "/laptop/inv.yaml"]
    uploaded = "/tmp/deployctl-inventory.Ab12Cd/inventory.yaml"
    assert remote_argv(argv, "promote", uploaded, "lap:/laptop/inv.yaml git:abc") == [
        "--inventory-from", "lap:/laptop/inv.yaml git:abc", "--uploaded-inventory", "promote", "neutral", "-d", "glm5",
        "-i", uploaded, "--in-unit"]
    assert remote_argv(["-H", "h", "--remote-inventory", "history"], "history", None, None) == ["history"]
    # the host's to remove only when it is the upload: never forwarded from the laptop's own command line
    assert remote_argv(["--uploaded-inventory", "history"], "history", None, None) == ["history"]


@pytest.mark.parametrize("path", [
    "/tmp/deployctl-inventory.Ab12Cd/inventory.yaml",
])
def test_only_an_uploaded_inventory_is_removed_by_the_host(path):
    assert str(upload_directory(path)) == "/tmp/deployctl-inventory.Ab12Cd"


@pytest.mark.parametrize("path", [
    "/etc/deployctl/inventory.yaml", "/tmp/inventory.yaml", "/tmp/deployctl-inventory.Ab12Cd/../../etc/inventory.yaml",
    "/tmp/deployctl-inventory.../inventory.yaml", "/tmp/deployctl-inventory.Ab12Cd/x/inventory.yaml",
    "tmp/deployctl-inventory.Ab12Cd/inventory.yaml", "/tmp/deployctl-inventory.Ab12Cd/inventory.yaml\n",
    "/tmp/deployctl-inventory.Ab12Cd",
])
def test_any_other_path_is_refused_before_anything_is_removed(path):
    with pytest.raises(UsageError, match="not an inventory uploaded by `deployctl -H`"):
        upload_directory(path)


# --- the runner's dead-man hook -----------------------------------------------------------------------


class FakeGuard:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def arm(self, release_id: int) -> str:
        self.log.append(f"arm {release_id}")
        return "armed"

    def renew(self) -> None:
        self.log.append("renew")

    async def disarm(self) -> None:
        self.log.append("disarm")


@pytest.mark.parametrize("verdict, result", [(JudgeOutcome.PASS, m.Result.KEPT), (JudgeOutcome.FAIL, m.Result.REJECTED)])
async def test_the_switch_is_armed_after_install_and_disarmed_once_kept_or_rolled_back(verdict, result):
    calls: list[str] = []
    a = replace(adapters(judge=FakeJudge([JudgeResult(verdict, ("r",))])), guard=FakeGuard(calls))
    a.units.calls = calls  # one log for both, to see the order
    p = plan()
    with memory_ledger() as ledger:
        rid = ledger.begin_release(deployment=p.deployment, kind="promote", unit_name=p.unit_name,
                                   unit_text=p.candidate_text, unit_hash=p.candidate_hash, who="t")
        out = await Runner(ledger, a, p, rid).run(m.start())
    assert out.state.result is result
    steps = [c for c in calls if c != "renew"]
    assert steps[:2] == ["install_trial", f"arm {rid}"] and steps[-1] == "disarm" and steps.count("disarm") == 1
    # every step renews the lease: the restart, the startup gates, each benchmark, the judge, the keep or rollback
    after_arm = calls[calls.index(f"arm {rid}"):]
    assert after_arm.count("renew") >= 4


# --- the verb's command line carries the inventory ------------------------------------------------------


def test_the_verb_script_writes_the_inventory_privately_and_hands_it_to_the_execd_command(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    from deployctl.console.remote import MAX_INVENTORY_BYTES, UPLOADED, verb_script

    inventory = b"# it's 'quoted' $(and) `not run`\nhosts: {}\n"
    script = verb_script(["sh", "-c", 'stat -c %a "$(dirname "$1")"; cat "$1"; echo "$1"', "sh", UPLOADED], inventory)
    done = subprocess.run(["sh", "-c", script], capture_output=True, timeout=10)
    mode, *body, path = done.stdout.decode().splitlines()
    try:
        assert done.returncode == 0 and mode == "700" and "\n".join(body).encode() + b"\n" == inventory
        assert re.fullmatch(r"/tmp/deployctl-inventory\.\w{6}/inventory\.yaml", path)
    finally:
        shutil.rmtree(Path(path).parent, ignore_errors=True)
    assert verb_script(["deployctl", "status"], None) == "exec deployctl status"
    with pytest.raises(InputError, match="too large for -H"):
        verb_script(["deployctl", "status", "-i", UPLOADED], b"x" * (MAX_INVENTORY_BYTES + 1))

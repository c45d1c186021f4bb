"""Long operations in transient units, the dead-man's switch, and `deployctl -H` over a real OpenSSH server.

Everything runs against the sandboxed systemd and the simulator. The "host" is the sandbox: its systemd
owns the operation units and the dead-man's timer, and an sshd started as a unit inside it listens on
127.0.0.1 (the sandbox shares the network namespace). The "laptop" is this test process, outside.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.clirun import free_port
from support.promote_world import SLOW_PROFILE, TWO_WAVES_POLICY, one_deployment, wait_for
from support.sshd import Sshd, make_keys, start_sshd

from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox
from deployctl.decisions.machine import Result

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
DEP = "glm5-sim"
UNIT = "sglang-glm5-sim.service"
OPERATION_UNIT = "deployctl-promote-glm5-sim.service"


def make_inventory(path: Path, **policy: Any) -> Path:
    # Its own path in it: the copy uploaded to the host is told from other tests' (/tmp is the machine's).
    path.write_text(f"# {path}\n" + yaml.safe_dump(one_deployment(DEP, {"slow": SLOW_PROFILE}, policy)))
    return path


UPLOADED = re.compile(r"/tmp/deployctl-inventory\.[A-Za-z0-9]{6}")


def uploads_of(inventory: Path) -> list[Path]:
    """The directories on the host (the sandbox shares /tmp) holding an upload of ``inventory``."""
    text = inventory.read_bytes()
    return [d for d in Path("/tmp").glob("deployctl-inventory.*") if (d / "inventory.yaml").is_file()
            and (d / "inventory.yaml").read_bytes() == text]


class Host:
    """deployctl run on the host (inside the sandbox), as root there."""

    def __init__(self, box: Sandbox, inventory: Path, state_dir: Path) -> None:
        self.box, self.inventory, self.state_dir = box, inventory, state_dir

    def env(self) -> dict[str, str]:
        return {**os.environ, "DEPLOYCTL_INVENTORY": str(self.inventory), "DEPLOYCTL_STATE_DIR": str(self.state_dir),
                "PYTHONPATH": str(REPO), "NO_COLOR": "1"}

    def __call__(self, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.box.nsenter([sys.executable, "-m", "deployctl", *args]), env=self.env(),
                              capture_output=True, text=True, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.box.nsenter([sys.executable, "-m", "deployctl", *args]), env=self.env(),
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.box.run(["systemctl", *args], timeout=30)

    def restart_baseline(self) -> None:
        done = self("restart", DEP, "--profile", "baseline")
        assert done.returncode == 0, done.stdout + done.stderr


def installed_profile(box: Sandbox) -> str:
    text = (box.unit_dir / UNIT).read_text()
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("X-Deployctl-Profile="))


_LAST_RELEASE = """
import json, sqlite3, sys
from pathlib import Path
db = Path(sys.argv[1]) / "ledger.sqlite3"
row = None
if db.exists():
    con = sqlite3.connect(db, timeout=5)
    con.row_factory = sqlite3.Row
    try:
        found = con.execute("SELECT * FROM releases WHERE kind='promote' ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # the promote has created the file, not its tables yet
        found = None
    if found is not None:
        notes = con.execute("SELECT detail_json FROM events WHERE release_id=? AND kind='note'", (found["id"],))
        row = {**dict(found), "notes": " ".join(n[0] for n in notes)}
print(json.dumps(row))
"""


def last_release(box: Sandbox, state_dir: Path) -> dict[str, Any] | None:
    """The newest promote in the ledger, read on the host (where its WAL and locks are)."""
    done = box.run([sys.executable, "-c", _LAST_RELEASE, str(state_dir)], timeout=30, check=True)
    return json.loads(done.stdout)


@pytest.fixture
def host(sandbox: Sandbox, tmp_path: Path) -> Host:
    h = Host(sandbox, make_inventory(tmp_path / "inventory.yaml"), tmp_path / "state")
    h.restart_baseline()
    return h


def test_promote_in_a_unit_is_followed_and_attach_shows_its_result(host: Host):
    done = host("promote", "neutral", "--fresh-baseline", "--in-unit")
    release = last_release(host.box, host.state_dir)
    # Kept, or judged within noise on a busy machine: either way the exit code is the ledger's result's.
    assert release and done.returncode == Result(release["result"]).exit_code, done.stdout + done.stderr
    assert done.returncode in (ExitCode.OK, ExitCode.INCONCLUSIVE, ExitCode.REJECTED), done.stdout + done.stderr
    assert f"runs in {OPERATION_UNIT}" in done.stderr and "BENCH" in done.stderr  # progress, on stderr
    assert "judge" in done.stdout.lower() and "BENCH" not in done.stdout  # the result, on stdout
    assert installed_profile(host.box) == ("neutral" if release["result"] == "kept" else "baseline")
    assert "inventory sha256:" in release["notes"]
    assert host.systemctl("is-active", "deployctl-deadman-glm5-sim.timer").stdout.strip() != "active"
    again = host("attach", DEP)
    assert again.returncode == done.returncode and again.stdout == done.stdout, again.stdout + again.stderr


def test_ctrl_c_without_a_terminal_detaches_and_attach_follows_to_the_end(host: Host):
    follower = host.start("promote", "neutral", "--fresh-baseline", "--in-unit")
    try:
        wait_for("the promote benchmarks", lambda: (last_release(host.box, host.state_dir) or {}).get("phase")
                 in ("BASELINE", "INSTALL", "RESTART", "STARTUP", "BENCH"), 60)
        # nsenter forks: the deployctl inside is its child, and the one to get the Ctrl-C
        (child,) = Path(f"/proc/{follower.pid}/task/{follower.pid}/children").read_text().split()
        os.kill(int(child), signal.SIGINT)
        out, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == ExitCode.DETACHED, out + err
    assert f"detached: {OPERATION_UNIT} goes on; `deployctl attach {DEP}`" in err
    attached = host("attach", DEP)  # from its first line, following it to the end
    release = last_release(host.box, host.state_dir)
    assert release["finished_at"] and attached.returncode == Result(release["result"]).exit_code, attached.stderr
    assert "PREFLIGHT" in attached.stderr and "judge" in attached.stdout.lower()


# The example inventory's policy (inventory/example.yaml): 30-minute startup timeout, 600 s requests, the
# switch's defaults. Before the lease its dead-man's bound was 55,860 s (15.5 h). Only the load is cut to
# the simulator's size (levels, tokens, requests): it decides nothing about the switch.
EXAMPLE_POLICY = {**yaml.safe_load((REPO / "inventory" / "example.yaml").read_text())["policy"],
                  "bench": {**TWO_WAVES_POLICY["bench"], "concurrency": [2]}}
KNOWN_GOOD_WITHIN_S = 120  # the target: after the controller's death, plus the known-good unit's startup


@pytest.mark.parametrize("how", ["in-a-unit-over-ssh", "plain-local-promote"])
def test_a_killed_controller_is_rolled_back_by_the_dead_mans_switch(sandbox: Sandbox, tmp_path: Path,
                                                                   request: pytest.FixtureRequest, how: str):
    over_ssh = how == "in-a-unit-over-ssh"
    # Over SSH: the example's policy as it is. A plain promote (no -H, no --in-unit, a process of this
    # terminal) checks every 3 s, to keep the suite short: what is tested is that the switch covers it.
    policy = EXAMPLE_POLICY if over_ssh else {**EXAMPLE_POLICY, "dead_man_check_s": 3}
    inventory = make_inventory(tmp_path / "inventory.yaml", **policy)
    host = Host(sandbox, inventory, tmp_path / "state")
    host.restart_baseline()
    planned = host("promote", "slow", "--dry-run", "--skip-preflight", "--json")
    assert json.loads(planned.stdout)["dead_man"] == {"check_s": policy["dead_man_check_s"] if not over_ssh else 30,
                                                      "stall_s": 1800 + 60}, planned.stdout
    promote = ["promote", "slow", "--fresh-baseline"]
    # Over SSH the killed unit takes the uploaded inventory with it: the switch recovers with its own copy.
    follower = laptop_start(request.getfixturevalue("sshd"), [*promote, "-i", str(inventory), "--state-dir",
                                                              str(host.state_dir)]) if over_ssh else host.start(*promote)
    try:
        wait_for("the promote reaches BENCH", lambda: (last_release(host.box, host.state_dir) or {}).get("phase") == "BENCH", 120)
        assert host.systemctl("is-active", "deployctl-deadman-glm5-sim.timer").stdout.strip() == "active"
        if over_ssh:
            assert host.systemctl("kill", "--signal=SIGKILL", OPERATION_UNIT).returncode == 0
        else:
            host.box.run(["kill", "-9", str(last_release(host.box, host.state_dir)["pid"])], check=True)
        killed = time.monotonic()
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == (ExitCode.OPERATION_LOST if over_ssh else -signal.SIGKILL), out + err
    assert installed_profile(sandbox) == "slow" or (sandbox.runtime_unit_dir / UNIT).exists()
    # Nobody runs a command from here on: the timer does.
    wait_for("the dead-man's switch restores the known-good unit",
             lambda: installed_profile(sandbox) == "baseline" and not (sandbox.runtime_unit_dir / UNIT).exists()
             and host.systemctl("is-active", UNIT).stdout.strip() == "active" and healthy(host), KNOWN_GOOD_WITHIN_S)
    took = time.monotonic() - killed
    release = wait_for("the ledger closes the release",
                       lambda: (r := last_release(host.box, host.state_dir)) and r["finished_at"] and r, 60)
    print(f"{how}: known-good healthy {took:.1f} s after the controller's death")
    assert release["result"] != "kept" and "recovered by `deployctl recover`" in release["notes"], release
    assert uploads_of(inventory) == []
    wait_for("the switch stops once nothing is left to guard",
             lambda: host.systemctl("is-active", "deployctl-deadman-glm5-sim.timer").stdout.strip() != "active", 30)


def healthy(host: Host) -> bool:
    port = yaml.safe_load(host.inventory.read_text())["deployments"][DEP]["port"]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def test_a_controller_alive_without_progress_is_told_to_roll_back(sandbox: Sandbox, tmp_path: Path):
    # The slow candidate finishes no request: no renewal for dead_man_s, though the controller lives.
    host = Host(sandbox, make_inventory(tmp_path / "inventory.yaml", dead_man_s=6, dead_man_check_s=2,
                                        bench=TWO_WAVES_POLICY["bench"]), tmp_path / "state")
    host.restart_baseline()
    done = host("promote", "slow", "--fresh-baseline", timeout=200)
    assert done.returncode == ExitCode.INTERRUPTED, done.stdout + done.stderr
    release = last_release(host.box, host.state_dir)
    assert release["result"] == "aborted" and "dead-man's switch expired: no progress" in release["reasons_json"], release
    assert installed_profile(sandbox) == "baseline" and not (sandbox.runtime_unit_dir / UNIT).exists()


def test_a_live_controllers_benchmark_many_times_the_stall_bound_is_not_cut(sandbox: Sandbox, tmp_path: Path):
    # "A 10-minute benchmark under a live controller is not cut", scaled down: the switch checks every
    # second and stops a controller after 4 s without progress; the candidate's benchmark lasts several
    # times that, its requests finishing all along (each renews the lease).
    stall = 4
    bench = {**TWO_WAVES_POLICY["bench"], "concurrency": [2], "requests_per_level": 150}
    host = Host(sandbox, make_inventory(tmp_path / "inventory.yaml", dead_man_s=stall, dead_man_check_s=1,
                                        bench=bench, judge={"min_trials": 2, "max_trials": 2, "baseline_trials": 2,
                                                            "limit_pct": 50}),
                tmp_path / "state")
    host.restart_baseline()
    since = host.box.run(["date", "+%Y-%m-%d %H:%M:%S"], check=True).stdout.strip()
    done = host("promote", "neutral", "--fresh-baseline", "--json", timeout=200)
    # Judged to its end, not cut: kept, or inconclusive when a loaded machine made a trial unusable (the
    # judge's call, not the switch's: no dead-man reason, no abort).
    assert done.returncode in (ExitCode.OK, ExitCode.INCONCLUSIVE), done.stdout + done.stderr
    out = json.loads(done.stdout)
    candidate_s = out["benchmark"]["candidate_s"]
    print(f"candidate benchmark {candidate_s:.1f} s under a stall bound of {stall} s: exit {done.returncode}")
    assert candidate_s > 3 * stall, out["benchmark"]
    release = last_release(host.box, host.state_dir)
    assert Result(release["result"]).exit_code == done.returncode, release
    assert release["result"] != "aborted" and "dead-man" not in release["reasons_json"], release
    assert installed_profile(sandbox) == ("neutral" if release["result"] == "kept" else "baseline")
    checks = host.box.run(["journalctl", "-q", "-o", "cat", "--since", since, "-u", "deployctl-deadman-glm5-sim.service"],
                          timeout=30).stdout
    assert checks.count("alive and making progress") >= 3, checks  # the switch looked, and let it run


# --- over SSH -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Sshd:
    server = start_sshd(sandbox, make_keys(tmp_path_factory.mktemp("sshd")))
    yield server
    server.stop()


def laptop_env(sshd: Sshd, key: str = "client", remote: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEPLOYCTL_", "DBUS_"))}
    return {**env, "NO_COLOR": "1", "DEPLOYCTL_SSH_OPTIONS": sshd.options(key),
            "DEPLOYCTL_REMOTE_COMMAND": remote or f"{sys.executable} -m deployctl"}


def laptop(sshd: Sshd, args: list[str], *, port: int | None = None, key: str = "client", remote: str | None = None,
           check_only: bool = False) -> Any:
    argv = [sys.executable, "-m", "deployctl", "-H", f"root@127.0.0.1:{port or sshd.port}", *args]
    done = subprocess.run(argv, env=laptop_env(sshd, key, remote), capture_output=True, text=True, timeout=150)
    if check_only:
        return done.returncode == 0
    return done


def laptop_start(sshd: Sshd, args: list[str]) -> subprocess.Popen[str]:
    """``deployctl -H`` in its own session (killpg kills it and its ssh, as a dropped Wi-Fi would)."""
    return subprocess.Popen([sys.executable, "-m", "deployctl", "-H", f"root@127.0.0.1:{sshd.port}", *args],
                            env=laptop_env(sshd), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_a_killed_laptop_client_leaves_the_promote_running_and_attach_shows_it(sshd: Sshd, sandbox: Sandbox,
                                                                                tmp_path: Path):
    inventory = make_inventory(tmp_path / "laptop-inventory.yaml")
    Host(sandbox, inventory, Path("/var/lib/deployctl")).restart_baseline()
    client = laptop_start(sshd, ["promote", "neutral", "--fresh-baseline", "-i", str(inventory)])
    try:
        wait_for("the promote runs on the host",
                 lambda: sandbox.run(["systemctl", "is-active", OPERATION_UNIT]).stdout.strip() == "active", 60)
        os.killpg(client.pid, signal.SIGKILL)  # the laptop's deployctl and its ssh: a dropped Wi-Fi
    finally:
        client.kill()
        client.communicate()
    assert len(uploads_of(inventory)) == 1  # the laptop is gone; the unit still reads it
    wait_for("the promote finishes on the host",
             lambda: sandbox.run(["systemctl", "is-active", OPERATION_UNIT]).stdout.strip() != "active", 150)
    assert uploads_of(inventory) == []  # the unit removed it when it stopped
    release = last_release(sandbox, Path("/var/lib/deployctl"))
    assert release and release["finished_at"], release
    attached = laptop(sshd, ["attach", DEP])
    assert attached.returncode == Result(release["result"]).exit_code, attached.stdout + attached.stderr
    assert "judge" in attached.stdout.lower(), attached.stdout
    assert installed_profile(sandbox) == ("neutral" if release["result"] == "kept" else "baseline")
    history = laptop(sshd, ["history", "-d", DEP])
    assert history.returncode == 0 and "neutral" in history.stdout, history.stdout + history.stderr
    # `show` tells what was promoted from where: the laptop's inventory, by content hash and path
    shown = laptop(sshd, ["show", str(release["id"])])
    digest = hashlib.sha256(inventory.read_bytes()).hexdigest()
    assert shown.returncode == 0 and f"inventory sha256:{digest} from " in shown.stdout, shown.stdout
    assert str(inventory) in shown.stdout


@pytest.mark.parametrize("case, code, words", [
    ("wrong version", ExitCode.REMOTE_INCOMPATIBLE, "runs deployctl 9.9.0"),
    ("refused key", ExitCode.SSH_REFUSED, "refused the SSH login"),
    ("unreachable", ExitCode.SSH_UNREACHABLE, "cannot reach root@127.0.0.1"),
])
def test_remote_failures_are_one_line_with_a_hint_and_their_own_exit_code(sshd: Sshd, tmp_path: Path, case: str,
                                                                          code: int, words: str):
    fake = tmp_path / "old-deployctl"
    fake.write_text("#!/bin/sh\necho 'deployctl 9.9.0'\n")
    fake.chmod(0o755)
    kwargs: dict[str, Any] = {"wrong version": {"remote": str(fake)}, "refused key": {"key": "stranger"},
                              "unreachable": {"port": free_port()}}[case]
    done = laptop(sshd, ["--remote-inventory", "status"], **kwargs)
    assert done.returncode == code, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and words in lines[0] and lines[1].startswith("hint: "), lines


@pytest.mark.parametrize("args, code", [
    (["validate"], ExitCode.OK),
    (["status", "-d", "no-such-deployment"], ExitCode.BAD_INPUT),
    (["promote", "neutral", "-d", "no-such-deployment"], ExitCode.BAD_INPUT),  # a long verb refused before its unit
    (["canary", "install", DEP, "--every", "6h"], ExitCode.BAD_INPUT),  # its timer would outlive the upload
])
def test_the_uploaded_inventory_is_removed_from_the_host_once_the_verb_is_done(sshd: Sshd, tmp_path: Path,
                                                                              args: list[str], code: int):
    inventory = make_inventory(tmp_path / "laptop-inventory.yaml")
    done = laptop(sshd, ["--json", *args, "-i", str(inventory)])
    assert done.returncode == code, done.stdout + done.stderr
    uploaded = UPLOADED.search(done.stdout)  # the host's deployctl names the inventory it read
    assert uploaded, done.stdout
    assert not Path(uploaded[0]).exists() and uploads_of(inventory) == []


# --- the edges: operation records, signals, uploads, links, the launch race ------------------------


def operation_active(box: Sandbox) -> bool:
    return box.run(["systemctl", "is-active", OPERATION_UNIT]).stdout.strip() in ("active", "activating")


def test_a_refused_rollback_from_a_second_caller_does_not_hide_the_running_promote(host: Host):
    promote = host.start("promote", "slow", "--fresh-baseline", "--in-unit")
    try:
        wait_for("the promote holds the lock", lambda: last_release(host.box, host.state_dir), 120)
        refused = host("rollback", DEP, "--in-unit")  # a second laptop, while the promote holds the lock
        assert refused.returncode == ExitCode.BUSY, refused.stdout + refused.stderr
        attached = host.start("attach", DEP)  # follows the promote, not the refused rollback
        time.sleep(2)
        assert attached.poll() is None, attached.communicate()
        stopped = host("abort", DEP)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        out, err = attached.communicate(timeout=120)
    finally:
        promote.kill()
        promote.communicate()
    assert attached.returncode == ExitCode.INTERRUPTED, out + err
    assert "PREFLIGHT" in err and "busy" not in out + err, out + err  # the promote's log, not the refusal's
    assert last_release(host.box, host.state_dir)["result"] == "aborted"


def test_two_launches_at_once_the_loser_is_busy_not_failed(sandbox: Sandbox, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    # The race, forced: both launchers look (the unit is not running), then the other one starts it first.
    from deployctl.adapters.systemd import Systemd
    from deployctl.adapters.transient import TransientService
    from deployctl.errors import Busy
    from deployctl.operations.operation import launch

    unit = "deployctl-promote-race.service"
    started = sandbox.run(["systemd-run", f"--unit={unit}", "--collect", "/bin/sleep", "60"], timeout=30)
    assert started.returncode == 0, started.stderr
    real_state = Systemd.unit_state

    async def looked_before_the_other_started(self: Systemd, name: str) -> Any:
        state = await real_state(self, name)
        return replace(state, active_state="inactive") if name == unit else state

    monkeypatch.setattr(Systemd, "unit_state", looked_before_the_other_started)
    service = TransientService(argv=["/bin/true"], description="the second launcher")
    try:
        with pytest.raises(Busy) as refused:
            asyncio.run(launch(sandbox.endpoint(), tmp_path, "promote", "race", service, "op"))
    finally:
        sandbox.run(["systemctl", "stop", unit])
    assert refused.value.exit_code == ExitCode.BUSY and "running already" in refused.value.message
    assert not (tmp_path / "operations").exists()  # no record for an operation that never ran


def test_an_interactive_abort_follows_the_rollback_and_exits_with_its_code(host: Host):
    # A real terminal: Ctrl-C is the line discipline's SIGINT to the whole foreground process group, which
    # deployctl leads (`setsid -c`: its own session, the pty its controlling terminal) inside the sandbox.
    master, slave = os.openpty()
    argv = ["setsid", "-w", "-c", sys.executable, "-m", "deployctl", "promote", "slow", "--fresh-baseline", "--in-unit"]
    proc = subprocess.Popen(host.box.nsenter(argv), env=host.env(), stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal's last user is gone
                return
            if not data:
                return
            seen.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        wait_for("the promote benchmarks", lambda: b"BENCH" in seen, 120)
        os.write(master, b"\x03")  # Ctrl-C
        wait_for("detach or abort?", lambda: b"[D/a]" in seen, 30)
        os.write(master, b"a\n")
        code = proc.wait(timeout=150)
    finally:
        proc.kill()
    reader.join(5)
    os.close(master)
    text = seen.decode(errors="replace")
    assert code == ExitCode.INTERRUPTED, text[-3000:]
    assert "sent SIGTERM" in text and "ended without a result" not in text, text[-3000:]
    release = last_release(host.box, host.state_dir)
    assert release["result"] == "aborted", release
    assert installed_profile(host.box) == "baseline"


@pytest.mark.parametrize("abort", [False, True], ids=["detaches", "aborts-with-the-flag"])
def test_ctrl_c_without_a_terminal_over_ssh(sshd: Sshd, sandbox: Sandbox, tmp_path: Path, abort: bool):
    inventory = make_inventory(tmp_path / "laptop-inventory.yaml")
    state = tmp_path / "state"
    host = Host(sandbox, inventory, state)
    host.restart_baseline()
    client = laptop_start(sshd, ["promote", "slow", "-d", DEP, "--fresh-baseline", "-i", str(inventory),
                                 "--state-dir", str(state), *(["--abort-on-interrupt"] if abort else [])])
    try:
        if abort:  # a release to abort (its baseline being measured is enough)
            wait_for("the promote has begun", lambda: last_release(sandbox, state), 120)
        else:
            wait_for("the promote runs on the host", lambda: operation_active(sandbox), 60)
        os.killpg(client.pid, signal.SIGINT)  # `… | tee log` and Ctrl-C: the whole foreground group
        out, err = client.communicate(timeout=150)
    finally:
        client.kill()
    if abort:
        assert client.returncode == ExitCode.INTERRUPTED, out + err
        assert "aborting promote" in err and "sent SIGTERM" in err
        assert last_release(sandbox, state)["result"] == "aborted"
        assert installed_profile(sandbox) == "baseline"
        return
    assert client.returncode == ExitCode.DETACHED, out + err
    assert f"attach {DEP}` follows it again" in err, err
    assert operation_active(sandbox)  # it goes on
    assert host("abort", DEP).returncode == 0


def ssh_wrapper(tmp_path: Path, second: str) -> dict[str, str]:
    """PATH with an `ssh` whose first call is the real one and whose second ``second`` says what it does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    count = tmp_path / "ssh-calls"
    (bin_dir / "ssh").write_text(f"""#!/bin/sh
n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}
if [ "$n" = 2 ]; then {second}; fi
exec /usr/bin/ssh "$@"
""")
    (bin_dir / "ssh").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_no_inventory_copy_is_left_when_the_verb_never_started(sshd: Sshd, tmp_path: Path):
    inventory = make_inventory(tmp_path / "laptop-inventory.yaml")
    fake = tmp_path / "old-deployctl"
    fake.write_text("#!/bin/sh\necho 'deployctl 9.9.0'\n")
    fake.chmod(0o755)
    other_version = laptop(sshd, ["status", "-i", str(inventory)], remote=str(fake))
    assert other_version.returncode == ExitCode.REMOTE_INCOMPATIBLE, other_version.stderr
    assert uploads_of(inventory) == []
    # The probe gets through, the verb's connection does not (the Wi-Fi dropped in between).
    env = {**laptop_env(sshd), **ssh_wrapper(tmp_path, "echo 'ssh: connect to host 127.0.0.1 port 22: Connection"
                                                       " refused' >&2; exit 255")}
    argv = [sys.executable, "-m", "deployctl", "-H", f"root@127.0.0.1:{sshd.port}", "promote", "neutral", "-d", DEP,
            "-i", str(inventory)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.SSH_UNREACHABLE, done.stdout + done.stderr
    assert "goes on" not in done.stderr and uploads_of(inventory) == []


def test_a_link_lost_after_the_promote_started_is_35_and_the_promote_goes_on(sshd: Sshd, sandbox: Sandbox,
                                                                             tmp_path: Path):
    inventory = make_inventory(tmp_path / "laptop-inventory.yaml")
    state = tmp_path / "state"
    host = Host(sandbox, inventory, state)
    host.restart_baseline()
    client = laptop_start(sshd, ["promote", "slow", "-d", DEP, "--fresh-baseline", "-i", str(inventory),
                                 "--state-dir", str(state)])
    try:
        wait_for("the promote runs on the host", lambda: operation_active(sandbox), 60)
        # The host side of the connection dies (a dropped link): sshd's session processes, not the unit.
        main = int(sandbox.run(["systemctl", "show", "-P", "MainPID", sshd.unit]).stdout)
        sessions = sandbox.run(["pgrep", "-P", str(main)]).stdout.split()
        assert sessions, "no SSH session on the host"
        for pid in sessions:
            sandbox.run(["kill", "-9", pid])
        out, err = client.communicate(timeout=60)
    finally:
        client.kill()
    assert client.returncode == ExitCode.SSH_LINK_LOST, out + err
    assert "lost after promote started" in err and f"attach {DEP}" in err
    assert operation_active(sandbox)
    assert host("abort", DEP).returncode == 0

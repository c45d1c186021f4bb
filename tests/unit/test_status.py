"""`deployctl status` output: what recovery did first, the unit's state, the live release."""

from __future__ import annotations

from pathlib import Path

from deployctl.adapters.unitfiles import UnitFile
from deployctl.commands.status import Status, status_lines
from deployctl.inventory.model import Host
from deployctl.operations.site import server_url
from deployctl.units.stamp import stamp_keys, unit_hash, with_hash
from deployctl.units.state import UnitState

RUNNING = UnitState(name="sglang-glm5.service", load_state="loaded", active_state="active", sub_state="running",
                    result="success", main_pid=4242, exec_main_code=0, exec_main_status=0, n_restarts=0,
                    invocation_id="ab" * 16, active_enter_us=1_000_000_000, need_daemon_reload=False,
                    fragment_path="/etc/systemd/system/sglang-glm5.service")


def test_recovery_comes_first_then_the_state_and_the_live_release():
    recovered = ("recovered release 7: the controller (pid 99) stopped during BENCH; recovered by `deployctl status`;"
                 " rolled back to the known-good unit and verified it",)
    status = Status("glm5", RUNNING, None, None, (), now=1090.0, live_release="live release 6: neutral (promote …)",
                    live_release_id=6, recovered=recovered)
    lines = status_lines(status)
    assert lines[0] == "recovered: " + recovered[0]
    assert lines[1] == "sglang-glm5.service (glm5)" and lines[2] == "  state:     active/running, up 1m 30s"
    assert "  live release 6: neutral (promote …)" in lines
    data = status.to_dict()
    assert data["recovered"] == list(recovered) and data["live_release"] == 6


def test_nothing_to_recover_adds_no_line():
    lines = status_lines(Status("glm5", RUNNING, None, None, (), now=1000.0))
    assert lines[0] == "sglang-glm5.service (glm5)" and not any("recovered" in line for line in lines)


def _installed(text: str) -> UnitFile:
    return UnitFile(Path("/etc/systemd/system/sglang-glm5.service"), text, trial=False, keys=stamp_keys(text))


def test_status_names_the_unit_by_the_ledgers_hash_which_is_the_stamps():
    """0.1 showed the stamp's hash here and the whole text's SHA-256 in `history`: two hashes, one unit."""
    text, stamped = with_hash("[Unit]\nX-Deployctl-Deployment=glm5\nX-Deployctl-Profile=baseline\n"
                              "X-Deployctl-Hash=\n[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server\n")
    installed = _installed(text)
    data = Status("glm5", RUNNING, installed, None, (), now=1000.0).to_dict()
    assert data["unit_hash"] == stamped == unit_hash(text) == installed.sha256  # what adopt/promote record
    assert data["unit_intact"] is True and data["profile"] == "baseline"
    edited = _installed(text.replace("sglang.launch_server", "sglang.launch_server --tp 4"))
    data = Status("glm5", RUNNING, edited, None, (), now=1000.0).to_dict()
    # A hand edit: the file's own hash (what the ledger would record for it), not the stale stamp.
    assert data["unit_intact"] is False and data["unit_hash"] == unit_hash(edited.text) != stamped


def test_one_rule_gives_the_server_url():
    gpus = {"model": "M", "count": 1, "compute_capability": "sm120"}
    assert server_url(Host(address="gpu-7", gpus=gpus), 30000) == "http://gpu-7:30000"
    assert server_url(Host(address="localhost", gpus=gpus), 8000) == "http://127.0.0.1:8000"
    assert server_url(Host(address="gpu-7", gpus=gpus, simulated=True), 8000) == "http://127.0.0.1:8000"
    assert server_url(Host(address="fd00::7", gpus=gpus), 8000) == "http://[fd00::7]:8000"

"""`deployctl status` output: what recovery did first, the unit's state, the live release."""

from __future__ import annotations

from deployctl.commands.status import Status, status_lines
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

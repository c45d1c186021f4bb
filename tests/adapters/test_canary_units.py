"""The canary's units: systemd/ holds exactly what `deployctl canary install` writes, and systemd accepts it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deployctl.inventory.policy import Policy
from deployctl.operations.canary_units import Paths, UnitValueError, canary_timer, example_texts, schedule_dropin, unit_texts
from deployctl.decisions.canary import every_to_calendar

SYSTEMD_DIR = Path(__file__).resolve().parents[2] / "systemd"


def test_the_examples_in_systemd_are_what_install_writes():
    for name, text in example_texts().items():
        assert (SYSTEMD_DIR / name).read_text() == text, f"systemd/{name} is stale: regenerate it from example_texts()"


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path):
    paths = Paths(python=sys.executable, inventory="/etc/deployctl/inventory.yaml", state_dir="/var/lib/deployctl",
                  textfile_dir="/var/lib/prometheus/node-exporter")
    for name, text in unit_texts(Policy(), paths).items():
        (tmp_path / name.replace("@.", "@glm5.")).write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *sorted(p.name for p in tmp_path.iterdir())],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "deployctl" not in done.stderr, done.stderr
    for key in ("NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes", "ProtectHome=yes", "UMask=0077",
                'ReadWritePaths="/etc/systemd/system" "-/run/systemd/system.control" "/var/lib/deployctl"'):
        assert key in (tmp_path / "deployctl-canary@glm5.service").read_text(), key
    timer = (tmp_path / "deployctl-canary@glm5.timer").read_text()
    assert "Persistent=true" in timer and "RandomizedDelaySec=" in timer
    assert "AccuracySec=1s" in timer  # not systemd's default minute on top of the period


def test_the_stop_timeout_outlasts_the_slowest_rollback():
    policy = Policy.model_validate({"gates": {"startup_timeout_s": 3600}})
    service = unit_texts(policy, Paths("/x/python", "/i.yaml", "/var/lib/deployctl"))["deployctl-canary@.service"]
    assert "TimeoutStopSec=4200" in service


def test_paths_with_a_space_a_percent_and_quotes_are_escaped_for_systemd(tmp_path: Path):
    odd = "/var/lib/deploy ctl/100% \"x\""
    # systemd refuses quotes in an executable's name whatever the quoting; elsewhere they are escaped
    paths = Paths(python="/opt/deploy ctl/100%/python", inventory=f"{odd}/inv.yaml", state_dir=f"{odd}/state",
                  textfile_dir=f"{odd}/metrics")
    texts = unit_texts(Policy(), paths)
    service = texts["deployctl-canary@.service"]
    assert 'ExecStart="/opt/deploy ctl/100%%/python" -m deployctl canary %i' in service
    assert '"DEPLOYCTL_STATE_DIR=/var/lib/deploy ctl/100%% \\"x\\"/state"' in service
    assert '"-/var/lib/deploy ctl/100%% \\"x\\"/metrics"' in service
    for name, text in texts.items():
        (tmp_path / name.replace("@.", "@glm5.")).write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", "deployctl-canary@glm5.service"],
                          cwd=tmp_path, capture_output=True, text=True)
    # systemd reads the whole path, space and "%" as they are (it does not exist on this machine)
    assert "Command /opt/deploy ctl/100%/python is not executable" in done.stderr, done.stderr
    assert "bad unit file setting" not in done.stderr and "Unknown" not in done.stderr, done.stderr


def test_a_path_no_unit_file_can_carry_is_refused_by_name():
    with pytest.raises(UnitValueError, match="newline"):
        unit_texts(Policy(), Paths(python="/x/python", inventory="/etc/a\nb.yaml", state_dir="/var/lib/deployctl"))
    with pytest.raises(UnitValueError, match="systemd refuses"):
        unit_texts(Policy(), Paths(python='/opt/"x"/python', inventory="/etc/i.yaml", state_dir="/var/lib/deployctl"))


@pytest.mark.parametrize("every,calendar", [("6h", "*-*-* 00/6:00:00"), ("15min", "*:00/15"), ("1min", "*:00/1"),
                                            ("1d", "daily")])
def test_every_is_a_calendar_spec_systemd_reads(every, calendar):
    got, delay = every_to_calendar(every)
    assert got == calendar and 0 < delay <= 1800
    done = subprocess.run(["systemd-analyze", "calendar", got], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("every", ["7h", "5", "6x", "0h", "2d", "1s", "20s", "30s"])
def test_every_refuses_what_has_no_calendar_form(every):
    with pytest.raises(ValueError):
        every_to_calendar(every)


def test_the_schedule_dropin_replaces_the_default_calendar():
    assert "OnCalendar=\nOnCalendar=*:00/15\n" in schedule_dropin("*:00/15", 90)
    assert "OnCalendar=*-*-* 00/6:00:00" in canary_timer()


def test_a_deployctl_under_tmp_gets_no_private_tmp_that_would_hide_it() -> None:
    from deployctl.operations.canary_units import private_tmp_for

    assert private_tmp_for("/opt/deployctl/.venv/bin/python", "/etc/deployctl/inventory.yaml") == "yes"
    assert private_tmp_for("/tmp/ci/.venv/bin/python", "/etc/deployctl/inventory.yaml") == "no"
    assert private_tmp_for("/usr/bin/python3", "/var/tmp/inventory.yaml") == "no"

"""Rendered units as systemd itself reads them (``systemd-analyze verify``), and templates found on disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.hostile import HOSTILE, inventory_with
from testpaths import REPO

from deployctl.inventory.model import Inventory, load_inventory
from deployctl.units.render import render_unit
from deployctl.units.stamp import read_stamp

EXAMPLE = REPO / "inventory" / "example.yaml"
DEMO = REPO / "inventory" / "demo.yaml"


def with_python(path: Path, tmp_path: Path, python: str = sys.executable) -> Inventory:
    """A copy of an inventory whose hosts run ``python`` (so systemd-analyze finds the executable)."""
    data = yaml.safe_load(path.read_text())
    for host in data["hosts"].values():
        if "python" in host:
            host["python"] = python
    tmp_path.mkdir(parents=True, exist_ok=True)
    copy = tmp_path / path.name
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_inventory(copy)


def systemd_verify(text: str, unit_name: str, directory: Path) -> subprocess.CompletedProcess[str]:
    directory.mkdir(parents=True, exist_ok=True)
    unit = directory / unit_name  # verify needs the final name: "x.tmp" fails to load
    unit.write_text(text)
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)


def test_every_unit_passes_systemd_analyze_verify_with_empty_stderr(tmp_path: Path) -> None:
    checked = 0
    for source in (EXAMPLE, DEMO):
        inv = with_python(source, tmp_path / source.stem)
        for name, dep in inv.deployments.items():
            for profile in dep.profiles:
                unit = render_unit(inv, dep, profile, default_python=sys.executable)
                result = systemd_verify(unit.text, unit.name, tmp_path / "units" / f"{name}-{profile}")
                assert (result.returncode, result.stderr) == (0, ""), f"{name}/{profile}:\n{result.stderr}"
                checked += 1
    assert checked == 13


def test_a_missing_interpreter_is_what_systemd_analyze_catches(tmp_path: Path) -> None:
    # The check above is only meaningful if verify does fail on a bad unit here.
    unit = render_unit(load_inventory(EXAMPLE), "glm5", "baseline")
    result = systemd_verify(unit.text, unit.name, tmp_path)
    assert result.returncode != 0 or result.stderr


def test_systemd_accepts_the_escaped_hostile_unit(tmp_path: Path) -> None:
    values = [v for v in HOSTILE if v != ""]
    flags = {f"x-{i}": v for i, v in enumerate(values)}
    env = {f"V{i}": v for i, v in enumerate(values)}
    unit = render_unit(inventory_with(flags=flags, env=env, served_name=HOSTILE[0]), "d", "baseline")
    result = systemd_verify(unit.text, unit.name, tmp_path)
    assert (result.returncode, result.stderr) == (0, "")


def test_a_template_next_to_the_inventory_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["deployments"]["glm5"]["template"] = "custom.service.j2"
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "custom.service.j2").write_text(
        "[Unit]\nX-Deployctl-Deployment={{ deployment }}\nX-Deployctl-Profile={{ profile }}\n"
        "X-Deployctl-Hash={{ content_hash }}\n[Service]\nExecStart={{ exec_start }}\n"
        "Environment={{ 'odd \"value\"' | exec_arg }}\n")
    monkeypatch.chdir(tmp_path)
    inv = load_inventory("inv.yaml")  # a relative name, then the working directory changes
    monkeypatch.chdir("/")
    unit = render_unit(inv, "glm5", "baseline")
    assert unit.text.startswith("[Unit]\nX-Deployctl-Deployment=glm5\n")
    assert 'Environment="odd \\"value\\""' in unit.text
    assert read_stamp(unit.text).intact

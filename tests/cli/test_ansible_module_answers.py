"""The collection's deployctl_promote module run as Ansible runs it (its file, an args file), against the real
deployctl and against an answer deployctl does not give: what check mode returns, and what a failure says.
The rollout itself, through ansible-playbook and a sandboxed systemd, is tests/system/test_fleet_ansible.py."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testpaths import REPO

pytest.importorskip("ansible.module_utils.basic", reason="ansible-core is not installed (the test extra)")

MODULE = REPO / "ansible" / "ansible_collections" / "deployctl" / "sglang" / "plugins" / "modules" / "deployctl_promote.py"
EXAMPLE = REPO / "inventory" / "example.yaml"


def run_module(tmp_path: Path, **params: Any) -> dict[str, Any]:
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"deployment": "glm5", "profile": "candidate",
                                                         "_ansible_check_mode": True, **params}}))
    env = {**os.environ, "PYTHONPATH": str(REPO / "ansible"), "DEPLOYCTL_UNIT_DIR": str(tmp_path / "units"),
           "DEPLOYCTL_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True, text=True, env=env,
                          timeout=120)
    return json.loads(done.stdout)


def test_check_mode_returns_the_profile_diff_as_the_tasks_diff(tmp_path: Path) -> None:
    """Issue 38.8: --check --diff showed nothing; the plan's profile diff stayed in the registered outcome."""
    result = run_module(tmp_path, executable=f"{shlex.quote(sys.executable)} -m deployctl", inventory=str(EXAMPLE))
    assert result["result"] == "planned" and result["changed"] and not result.get("failed"), result
    plan = result["outcome"]["profile_diff"]
    assert plan and result["profile_diff"] == plan
    assert result["diff"]["prepared"] == "\n".join(
        ["sglang-glm5.service would restart", *(f"  {line}" for line in plan)]) + "\n"


def test_a_json_answer_without_an_error_is_quoted_not_called_no_output(tmp_path: Path) -> None:
    answer = shlex.join([sys.executable, "-c", "print('{\"result_v9\": \"kept\"}')"])
    result = run_module(tmp_path, executable=answer)
    assert result["failed"] and "no output" not in result["msg"]
    assert result["msg"] == ('deployctl promote --dry-run: exit 0, and a JSON document without an error: '
                             '{"result_v9": "kept"}')
    silent = run_module(tmp_path, executable=shlex.join([sys.executable, "-c", "raise SystemExit(70)"]))
    assert silent["msg"] == ("deployctl promote --dry-run hit a bug in deployctl (exit 70: please report it with the "
                             "stderr): nothing on stdout or stderr (exit 70)")

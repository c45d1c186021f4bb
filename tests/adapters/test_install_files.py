"""``python -m deployctl.install`` on directories of the test's own: what it writes, and that --uninstall takes
exactly that away again (with what `canary install` added), keeping the ledger unless --purge."""

from __future__ import annotations

from pathlib import Path

from deployctl.install import install, uninstall
from testpaths import REPO


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_uninstall_removes_what_install_and_canary_install_wrote_and_nothing_else(tmp_path: Path) -> None:
    prefix, units, polkit, state = tmp_path / "usr", tmp_path / "units", tmp_path / "polkit", tmp_path / "state"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "other-tool").write_text("not ours\n")
    (units / "sglang-glm5.service").parent.mkdir(parents=True)
    (units / "sglang-glm5.service").write_text("[Service]\n")  # a deployment's unit: the operator's
    state.mkdir()
    (state / "ledger.sqlite3").write_text("")
    before = _files(tmp_path)
    written = install(prefix, units, polkit, REPO / "inventory" / "example.yaml")
    assert len(written) == 9 and (polkit / "50-deployctl.rules").exists()
    # what `deployctl canary install glm5` adds: the schedule drop-in and the enabling link
    (units / "deployctl-canary@glm5.timer.d").mkdir()
    (units / "deployctl-canary@glm5.timer.d" / "schedule.conf").write_text("[Timer]\n")
    (units / "timers.target.wants").mkdir()
    (units / "timers.target.wants" / "deployctl-canary@glm5.timer").symlink_to(units / "deployctl-canary@.timer")
    removed = uninstall(prefix, units, polkit, None)
    assert _files(tmp_path) == before and len(removed) == 11
    assert uninstall(prefix, units, polkit, state) == [str(state)] and not state.exists()  # --purge: the ledger

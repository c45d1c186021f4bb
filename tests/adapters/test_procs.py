"""The server's process tree, read from /proc (psutil) by pid or by the unit's cgroup."""

from __future__ import annotations

import os

import pytest

from deployctl.adapters.procs import ProcessTree


def test_process_tree_of_a_pid_and_of_a_cgroup(tmp_path):
    ticks = iter([0.0, 1.0, 2.0])
    tree = ProcessTree(pid=os.getpid(), clock=lambda: next(ticks))
    first, second = tree.read(), tree.read()
    assert first.cpu_pct is None and second.cpu_pct is not None and second.processes >= 1
    cg = tmp_path / "system.slice" / "sglang.service"
    cg.mkdir(parents=True)
    (cg / "cgroup.procs").write_text(f"{os.getpid()}\n")
    tree = ProcessTree(cgroup="/system.slice/sglang.service", cgroup_root=tmp_path)
    assert tree.pids() == [os.getpid()] and tree.read().threads >= 1


def test_process_tree_of_nothing_is_none(tmp_path):
    assert ProcessTree(cgroup="/gone.service", cgroup_root=tmp_path).read() is None
    with pytest.raises(ValueError):
        ProcessTree()

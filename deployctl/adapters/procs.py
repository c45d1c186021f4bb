"""Process telemetry of the server: CPU, memory, threads and process count of its process tree.

The only importer of ``psutil``. The tree is the unit's cgroup when given (every process systemd
started for the unit, SGLang's per-rank schedulers and detokenizer included) or the MainPID and its
descendants. Processes come and go (a rank dies, a compile worker exits): a vanished process is
dropped from the reading, never an error.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import psutil

from deployctl.bench.telemetry import ProcSample

CGROUP_ROOT = Path("/sys/fs/cgroup")


class ProcessTree:
    """Readings of one server's processes: ``ProcessTree(pid=main_pid)`` or ``ProcessTree(cgroup=path)``.

    ``cgroup`` is the unit's ControlGroup as systemd reports it (``/system.slice/x.service``).
    """

    name = "process"

    def __init__(self, *, pid: int | None = None, cgroup: str | None = None, cgroup_root: Path = CGROUP_ROOT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if pid is None and cgroup is None:
            raise ValueError("ProcessTree needs a pid or a cgroup")
        self._pid = pid
        self._cgroup = cgroup_root / cgroup.lstrip("/") if cgroup else None
        self._procs: dict[int, psutil.Process] = {}
        self._cpu: dict[int, float] = {}
        self._last: float | None = None
        self._clock = clock

    def pids(self) -> list[int]:
        if self._cgroup is not None:
            try:
                text = (self._cgroup / "cgroup.procs").read_text()
            except OSError:
                return []
            return [int(x) for x in text.split()]
        try:
            root = psutil.Process(self._pid)
            return [root.pid] + [p.pid for p in root.children(recursive=True)]
        except psutil.Error:
            return []

    def read(self) -> ProcSample | None:
        """One reading; None when none of the processes exists (the server is down)."""
        rss = 0
        threads = 0
        alive = 0
        cpu_s: dict[int, float] = {}
        for pid in self.pids():
            proc = self._procs.get(pid) or self._new(pid)
            if proc is None:
                continue
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    rss += proc.memory_info().rss
                    threads += proc.num_threads()
            except psutil.Error:
                self._procs.pop(pid, None)
                continue
            alive += 1
            cpu_s[pid] = times.user + times.system
        if not alive:
            return None
        # Stamped after the CPU times are read: the read itself may wait on the GIL for a while.
        now = self._clock()
        cpu_pct = None
        if self._last is not None and now > self._last:
            # Only processes seen both times count; a new one's earlier CPU time is not in this window.
            used = sum(max(0.0, t - self._cpu[pid]) for pid, t in cpu_s.items() if pid in self._cpu)
            cpu_pct = 100 * used / (now - self._last)
        self._cpu, self._last = cpu_s, now
        return ProcSample(cpu_pct=cpu_pct, rss_gb=rss / 1024**3, threads=threads, processes=alive)

    def _new(self, pid: int) -> psutil.Process | None:
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            return None
        self._procs[pid] = proc
        return proc

    def close(self) -> None:
        self._procs.clear()

"""Host probes that need nothing but this process: the port owner, paths, the interpreter probe."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deployctl.errors import InputError
from deployctl.preflight.hostfacts import (
    ProbeRequest,
    normalize_cc,
    port_state,
    probe_local_host,
)
from deployctl.preflight.installed import probe_interpreter


def test_a_listening_port_is_attributed_to_its_process() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        state, holder = port_state(port, "sglang-nothing-like-this.service")
    assert state == "held_by_other"
    assert holder is not None and f"pid {os.getpid()} " in holder


def test_a_listening_port_held_by_the_units_own_cgroup(tmp_path: Path) -> None:
    tails = [line.rsplit("/", 1)[-1] for line in Path("/proc/self/cgroup").read_text().splitlines()]
    cgroup = next((t for t in tails if t), "")
    if not cgroup:
        pytest.skip("this process sits in the root cgroup: no unit name to match")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        state, _ = port_state(sock.getsockname()[1], cgroup)
    assert state == "held_by_unit"


def test_a_closed_port_is_free() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert port_state(port, "x.service") == ("free", None)


def test_local_probe_paths(tmp_path: Path) -> None:
    facts = probe_local_host(ProbeRequest(sys.executable, str(tmp_path / "no-cuda"), 0, "x.service",
                                          (str(tmp_path / "not" / "yet" / "there"),)))
    assert facts.python_executable and facts.cuda_home_exists is False
    assert facts.disk_free_bytes[0][1] > 0  # the nearest existing parent was measured


@pytest.mark.parametrize(("value", "expected"), [((12, 0), "sm120"), ("12.0", "sm120"), ("sm_90", "sm90"),
                                                 ("SM100", "sm100"), (None, None)])
def test_compute_capability_spellings(value, expected) -> None:
    assert normalize_cc(value) == expected


def test_interpreter_probe_without_sglang() -> None:
    installed = probe_interpreter(sys.executable)
    assert installed.sglang_version is None and installed.source_root is None
    assert installed.python_version == tuple(sys.version_info[:3])


def test_interpreter_probe_of_a_missing_interpreter(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        probe_interpreter(str(tmp_path / "python3"))


def test_a_server_sharing_our_cgroups_is_taken_for_the_unit(tmp_path: Path) -> None:
    # Without cgroup delegation (containers, the sandbox) the unit's process has deployctl's cgroups;
    # its command line (-m deployctl.sim / -m sglang.launch_server) identifies it instead.
    script = ("import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); "
              "print(s.getsockname()[1], flush=True); time.sleep(30)")
    server = subprocess.Popen([sys.executable, "-c", script, "-m", "deployctl.sim"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            other_port = int(other.stdout.readline())
            assert port_state(port, "sglang-sim.service")[0] == "held_by_unit"
            assert port_state(other_port, "sglang-sim.service")[0] == "held_by_other"
        finally:
            other.kill()
            other.wait()
    finally:
        server.kill()
        server.wait()

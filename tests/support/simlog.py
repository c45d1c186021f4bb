"""The simulator's startup log for a fixture's command, built in-process (no server, no sleeps)."""

from __future__ import annotations

import json
import shlex

from testpaths import DATA

from deployctl.sim import cli, startup
from deployctl.sim.faults import parse_faults
from deployctl.sim.resolve import Resolved, resolve
from deployctl.sim.world import host_from_env

LOGS = DATA / "logs"


def expectation(prefix: str) -> dict:
    return json.loads(next(LOGS.glob(f"{prefix}-*.expect.json")).read_text())


def resolved(expect: dict) -> Resolved:
    """The fixture's command, env and version as the simulator resolves them."""
    argv = shlex.split(expect["command"])
    argv = argv[argv.index("sglang.launch_server") + 1:]
    version = cli.canonical_version(expect["sglang_version"]["true_version"])
    parsed = cli.parse(version, argv)
    tp = int(parsed.values.get("tp_size", 1))
    host = host_from_env({"SGLANG_SIM_GPU_COUNT": str(tp)})
    return resolve(version, parsed, host, {**expect["env"], "SGLANG_SIM_SEED": "1"})


def simulate(expect: dict, faults: str = "") -> tuple[str, int | None]:
    """The log and exit code (None: ready) of the fixture's command, env and version on the simulator."""
    r = resolved(expect)
    return startup.render_text(startup.script(r, parse_faults(faults).start, 4242, "0.0.0.0", 8000), r)

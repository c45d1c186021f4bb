"""The units that run deployctl unattended: ``deployctl-canary@.service`` + ``.timer`` (instance = the
deployment) and ``deployctl-promote@.service``, written with the paths of *this* installation (its
Python, inventory and state directory), so nothing depends on a binary the bootstrap never installs.

``systemd/`` in the repository holds these rendered with example paths (a test keeps them identical and
runs ``systemd-analyze verify`` on them). ``deployctl canary install`` writes them and enables the timer
over D-Bus; the schedule of one deployment is a drop-in of its timer instance.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from deployctl.adapters.transient import TransientService, timer_properties
from deployctl.adapters.unitfiles import atomic_write
from deployctl.errors import DeployctlError, InputError, SystemdError
from deployctl.inventory.policy import Policy
from deployctl.operations.site import Site
from deployctl.unit_escape import environment_assignment, exec_arg, list_item

if TYPE_CHECKING:
    from deployctl.adapters.systemd import Systemd

CANARY_SERVICE = "deployctl-canary@.service"
CANARY_TIMER = "deployctl-canary@.timer"
PROMOTE_SERVICE = "deployctl-promote@.service"


@dataclass(frozen=True)
class Paths:
    python: str  # the interpreter deployctl is installed in (`python -m deployctl`)
    inventory: str
    state_dir: str
    textfile_dir: str | None = None
    unit_dir: str = "/etc/systemd/system"
    runtime_unit_dir: str = "/run/systemd/system.control"
    backup_dir: str | None = None  # previous unit texts (deployctl.operations.restart), when outside state_dir
    # "read-only" when deployctl's interpreter or inventory lives under /home or /root (a pyenv Python,
    # a checkout in a home directory): "yes" would hide them and the unit would fail with 203/EXEC.
    protect_home: str = "yes"
    # "no" when deployctl itself (its venv, its checkout) or the inventory lives in /tmp or /var/tmp: a
    # private /tmp would hide them (203/EXEC), as a CI clone under /tmp shows.
    private_tmp: str = "yes"


def _common(paths: Paths, stop_s: int) -> str:
    # "-": a directory that does not exist yet (systemd creates the runtime one on first use) is no error.
    writable = [paths.unit_dir, f"-{paths.runtime_unit_dir}", paths.state_dir]
    if paths.backup_dir and not paths.backup_dir.startswith(paths.state_dir.rstrip("/") + "/"):
        writable.append(f"-{paths.backup_dir}")
    if paths.textfile_dir:
        writable.append(f"-{paths.textfile_dir}")
    env = {"DEPLOYCTL_INVENTORY": paths.inventory, "DEPLOYCTL_STATE_DIR": paths.state_dir, "NO_COLOR": "1",
           "PYTHONUNBUFFERED": "1", **({"DEPLOYCTL_TEXTFILE_DIR": paths.textfile_dir} if paths.textfile_dir else {})}
    # Quoted and escaped (deployctl.unit_escape): a path with a space stays one path, a "%" stays a "%".
    return (
        f"Environment={' '.join(_word(environment_assignment, k, v) for k, v in env.items())}\n"
        "# deployctl handles SIGTERM (`systemctl stop` = abort): time to roll back to the known-good unit and\n"
        "# wait for it to be ready (the policy's startup timeout) plus its verification sweep.\n"
        "KillMode=mixed\n"
        f"TimeoutStopSec={stop_s}\n"
        "NoNewPrivileges=yes\n"
        "ProtectSystem=strict\n"
        f"ReadWritePaths={' '.join(_word(list_item, w) for w in writable)}\n"
        # The per-unit locks (deployctl.adapters.lock): made writable here, and kept when the run ends, since
        # an operator's deployctl may hold a lock file in it at that moment.
        "RuntimeDirectory=deployctl/locks\n"
        "RuntimeDirectoryPreserve=yes\n"
        f"PrivateTmp={paths.private_tmp}\n"
        f"ProtectHome={paths.protect_home}\n"
        "UMask=0077\n"
    )


class UnitValueError(ValueError):
    """A path that no unit file can carry (a newline, a control character): refused before anything is written."""


def _executable(path: str) -> str:
    # systemd refuses an executable's name with a quote or a backslash in it, quoted or not
    if any(c in path for c in "\"'\\"):
        raise ValueError("has a quote or a backslash, which systemd refuses in an executable's name")
    return exec_arg(path)


def _word(render: Callable[..., str], *args: str) -> str:
    try:
        return render(*args)
    except ValueError as exc:
        raise UnitValueError(f"{args[-1]!r} {exc}") from None


def canary_service(paths: Paths, stop_s: int) -> str:
    return (
        "# deployctl's scheduled canary of deployment %i: watch the live release, try the pending candidate once.\n"
        "# Installed by `deployctl canary install %i --every 6h`; started by deployctl-canary@%i.timer.\n"
        "[Unit]\n"
        "Description=deployctl canary of deployment %i\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={_word(_executable, paths.python)} -m deployctl canary %i\n"
        "# 4 busy (an operator's promote), 10 rejected and 11 inconclusive (rolled back, live fine), 21 promoted,\n"
        "# 22 a degraded release rolled back to a better one, 23 unclear (it looks again sooner by itself): verdicts,\n"
        "# not failures. 20 degraded and 12 rollback failed leave the unit failed, for OnFailure= alerts.\n"
        "SuccessExitStatus=4 10 11 21 22 23\n"
        "# A canary that tries a candidate runs a whole promote: bounded, but generously.\n"
        "TimeoutStartSec=4h\n"
        + _common(paths, stop_s)
    )


def canary_timer(calendar: str = "*-*-* 00/6:00:00", delay_s: int = 1800) -> str:
    return (
        "# Runs deployctl-canary@%i.service on a schedule; `deployctl canary install %i --every P` sets P\n"
        "# in a drop-in of this instance. Persistent: a run missed while the host was down happens at boot.\n"
        "[Unit]\n"
        "Description=deployctl canary of deployment %i, on a schedule\n"
        "\n[Timer]\n"
        f"OnCalendar={calendar}\n"
        "Persistent=true\n"
        f"RandomizedDelaySec={delay_s}\n"
        "# The random delay is the spread; systemd's default AccuracySec=1min would add up to a minute more\n"
        "# (a canary --every 1min would run up to two minutes apart).\n"
        "AccuracySec=1s\n"
        "\n[Install]\n"
        "WantedBy=timers.target\n"
    )


def schedule_dropin(calendar: str, delay_s: int) -> str:
    return f"[Timer]\nOnCalendar=\nOnCalendar={calendar}\nRandomizedDelaySec={delay_s}\n"


def promote_service(paths: Paths, stop_s: int) -> str:
    return (
        "# Run a promote as a service of its own, so it outlives the operator's SSH session and its log stays in\n"
        "# the journal:\n"
        "#   echo 'PROFILE=candidate' > /etc/deployctl/decisions-glm5.env\n"
        "#   systemctl start deployctl-promote@glm5.service\n"
        "#   journalctl -f -u deployctl-promote@glm5.service      # follow it; `deployctl show -d glm5` afterwards\n"
        "# A promote killed half-way is recovered by the next deployctl command on that deployment.\n"
        "[Unit]\n"
        "Description=deployctl promote of deployment %i\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n[Service]\n"
        "Type=exec\n"
        "EnvironmentFile=/etc/deployctl/decisions-%i.env\n"
        f"ExecStart={_word(_executable, paths.python)} -m deployctl promote ${{PROFILE}} -d %i\n"
        "# Exit codes 10 (rejected, rolled back) and 11 (inconclusive, baseline kept) are verdicts, not failures.\n"
        "SuccessExitStatus=10 11\n"
        + _common(paths, stop_s)
    )


def protect_home_for(*files: str) -> str:
    homes = ("/home/", "/root/", "/run/user/")
    return "read-only" if any(os.path.realpath(f).startswith(homes) for f in files) else "yes"


def private_tmp_for(*files: str) -> str:
    temps = ("/tmp/", "/var/tmp/")
    return "no" if any(f.startswith(temps) or os.path.realpath(f).startswith(temps) for f in files) else "yes"


def stop_timeout_s(policy: Policy) -> int:
    """Longer than the worst rollback: the known-good unit's startup timeout plus ten minutes of margin."""
    return int(math.ceil(policy.gates.startup_timeout_s)) + 600


def unit_texts(policy: Policy, paths: Paths) -> dict[str, str]:
    stop_s = stop_timeout_s(policy)
    return {CANARY_SERVICE: canary_service(paths, stop_s), CANARY_TIMER: canary_timer(),
            PROMOTE_SERVICE: promote_service(paths, stop_s)}


def install_plan(site: Site, paths: Paths, calendar: str, delay_s: int) -> dict[Path, str]:
    """The files ``canary install`` writes, with their texts (its --dry-run prints them)."""
    unit_dir = site.unit_files().unit_dir
    try:
        texts = unit_texts(site.policy, paths)
    except UnitValueError as exc:
        raise InputError(f"cannot write the canary's units: {exc}; nothing was written or enabled",
                         hint="install deployctl, the inventory and the state directory under paths without "
                              "control characters") from None
    return {**{unit_dir / name: text for name, text in texts.items()},
            unit_dir / f"{canary_timer_name(site.name)}.d" / "schedule.conf": schedule_dropin(calendar, delay_s)}


def canary_timer_name(deployment: str) -> str:
    return f"deployctl-canary@{deployment}.timer"


async def install(site: Site, paths: Paths, calendar: str, delay_s: int) -> list[str]:
    """Write the units and the instance's schedule, enable and start its timer; the files and the timer's
    name back. All or nothing: systemd is reached before anything is written, and a failure after that
    puts every file back as it was (the timer disabled again)."""
    plan = install_plan(site, paths, calendar, delay_s)
    timer = canary_timer_name(site.name)
    try:
        systemd = await site.endpoint.connect()
    except DeployctlError as exc:
        raise _also(exc, "nothing of the canary's install was written") from None
    # ReadWritePaths= of a missing state directory fails the unit; a missing textfile one stays read-only.
    directories = [site.state_dir, *([Path(paths.textfile_dir)] if paths.textfile_dir else []),
                   *{path.parent for path in plan}]
    made = [d for d in directories if not d.exists()]
    before = {path: path.read_text() if path.exists() else None for path in plan}
    enabled = False
    try:
        try:
            for directory in directories:
                directory.mkdir(parents=True, exist_ok=True)
            for path, text in plan.items():
                atomic_write(path, text)
        except OSError as exc:
            raise SystemdError(f"cannot write the canary's units in {site.unit_files().unit_dir}: {exc}",
                               hint="run as root") from exc
        await systemd.enable_unit_files([timer])
        enabled = True
        (await systemd.start(timer)).check()
    except BaseException as exc:  # Ctrl-C too: the files go back
        undone = await _undo(systemd, before, made, timer if enabled else None)
        if isinstance(exc, DeployctlError):
            raise _also(exc, undone) from None
        raise
    finally:
        await systemd.close()
    return [str(path) for path in plan] + [timer]


def _also(exc: DeployctlError, more: str) -> DeployctlError:
    """``exc``, its message saying ``more`` (what became of the files)."""
    exc.message = f"{exc.message}; {more}"
    exc.args = (exc.message,)
    return exc


async def _undo(systemd: Systemd, before: dict[Path, str | None], made: list[Path], enabled: str | None) -> str:
    """Put the files of a failed install back as they were; what it says about them."""
    left = []
    for path, text in before.items():
        try:
            if text is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write(path, text)
        except OSError:
            left.append(str(path))
    for directory in sorted(made, key=lambda d: len(d.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty: something else put a file there meanwhile
            directory.rmdir()
    try:
        if enabled:
            await systemd.disable_unit_files([enabled])
        else:
            await systemd.reload()
    except DeployctlError:
        left.append(f"{enabled or 'the units'} in systemd until `systemctl daemon-reload`")
    if left:
        return f"could not put back: {', '.join(left)}"
    return "nothing of the canary's install was kept (its files are as they were)"


def recheck_timer(deployment: str) -> str:
    return f"deployctl-canary-recheck-{deployment}.timer"


async def arm_recheck(site: Site, delay_s: float) -> str | None:
    """After an unclear watch: a one-shot timer that starts the installed canary service of ``site`` again
    ``delay_s`` from now (an earlier one is replaced). None when the canary is not installed here."""
    service = CANARY_SERVICE.replace("@", f"@{site.name}")
    if not (site.unit_files().unit_dir / CANARY_SERVICE).exists():
        return None
    timer = recheck_timer(site.name)
    # A transient timer cannot name the unit it triggers (systemd refuses Unit=): it triggers its own
    # transient service, which starts the installed canary service (not a second canary beside it).
    starter = TransientService(argv=[shutil.which("systemctl") or "/usr/bin/systemctl", "start", "--no-block", service],
                               description=f"deployctl: start {service} again after an unclear watch")
    async with await site.endpoint.connect() as systemd:
        await systemd.stop_if_loaded(timer)
        for unit in (timer, timer.replace(".timer", ".service")):
            await systemd.reset_failed(unit)
        properties = timer_properties(f"deployctl canary of {site.name}: look again after an unclear watch", delay_s)
        (await systemd.start_transient(timer, properties,
                                       [(timer.replace(".timer", ".service"), starter.properties())])).check()
    return timer


def example_texts() -> dict[str, str]:
    """``systemd/``'s examples: a checkout in /opt/deployctl set up by scripts/bootstrap, the default policy."""
    paths = Paths(python="/opt/deployctl/.venv/bin/python", inventory="/etc/deployctl/inventory.yaml",
                  state_dir="/var/lib/deployctl", textfile_dir="/var/lib/prometheus/node-exporter")
    return unit_texts(Policy(), paths)

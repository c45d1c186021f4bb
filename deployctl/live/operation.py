"""Long operations (promote, rollback) owned by PID 1: started as a transient unit, followed through the journal.

``launch`` starts ``deployctl VERB …`` as ``deployctl-VERB-DEPLOYMENT.service`` (what ``systemd-run
--unit=… --collect`` does), so the operation outlives the terminal, the SSH session or the laptop that
asked for it. ``follow`` prints the unit's lines as they are written (stdout lines to stdout, stderr lines
to stderr) and returns the operation's exit code, which the worker writes as its last line
(``EXIT_MARK``): with ``--collect`` the unit and its ExecMainStatus are gone the moment it ends, the
journal is not. ``attach`` is ``follow`` again, from the operation's first line, found by the record the
launcher left in the state directory.

Inside the unit (``WORKER_ENV`` set) stderr lines carry journald's ``<4>`` priority prefix (sd-daemon(3)),
which is how the follower tells them from stdout's.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TextIO

from deployctl.adapters.journal import decode_message, journal_argv
from deployctl.adapters.systemd import Systemd
from deployctl.adapters.transient import TransientService, operation_unit
from deployctl.errors import Busy, ExitCode, InputError, SystemdError
from deployctl.live.restart import Endpoint

WORKER_ENV = "DEPLOYCTL_OPERATION"
EXIT_MARK = "deployctl operation exit code: "
# Variables a transient unit inherits from its caller: where things are, who asked, and no secrets.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "NO_COLOR", "PYTHONPATH", "USER", "LOGNAME", "SUDO_USER",
              "SSH_CONNECTION", "DBUS_SYSTEM_BUS_ADDRESS")
_STDERR_PRIORITY = 4
# After the unit ended, how long its last lines may take to reach the journal.
_DRAIN_S = 5.0
_POLL_S = 1.0


@dataclass(frozen=True)
class OperationRecord:
    deployment: str
    verb: str
    unit: str
    invocation_id: str
    started: float

    @staticmethod
    def path(state_dir: Path, deployment: str) -> Path:
        return state_dir / "operations" / f"{deployment}.json"

    def save(self, state_dir: Path) -> None:
        path = self.path(state_dir, self.deployment)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, state_dir: Path, deployment: str) -> "OperationRecord":
        path = cls.path(state_dir, deployment)
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            raise InputError(f"no operation of {deployment} was started in a unit on this host ({path} is missing)",
                             hint=f"`deployctl history -d {deployment}` lists what ran") from None


def unit_environment(env: Mapping[str, str], unit: str) -> dict[str, str]:
    passed = {k: v for k, v in env.items() if k in PASSED_ENV or k.startswith("DEPLOYCTL_")}
    return {**passed, WORKER_ENV: unit, "PYTHONUNBUFFERED": "1"}


def worker_service(verb: str, deployment: str, argv: Sequence[str], env: Mapping[str, str], cwd: str,
                   stop_timeout_s: float, remove_after: str | None = None) -> TransientService:
    unit = operation_unit(verb, deployment)
    return TransientService(argv=[sys.executable, "-m", "deployctl", *argv],
                            description=f"deployctl {verb} {deployment}", environment=unit_environment(env, unit),
                            working_directory=cwd, stop_timeout_s=stop_timeout_s, remove_after=remove_after)


async def launch(endpoint: Endpoint, state_dir: Path, verb: str, deployment: str, service: TransientService) -> OperationRecord:
    unit = operation_unit(verb, deployment)
    async with await endpoint.connect() as systemd:
        state = await systemd.unit_state(unit)
        if state.active_state in ("active", "activating", "deactivating"):
            raise Busy(f"{unit} is running already", hint=f"`deployctl attach {deployment}` follows it")
        await systemd.reset_failed(unit)
        (await systemd.start_transient(unit, service.properties())).check()
        invocation = (await systemd.unit_state(unit)).invocation_id
        if not invocation:  # it ended (and was collected) before we could ask: only the journal knows why
            raise SystemdError(f"{unit} ended as soon as it started",
                               hint=f"see `journalctl -u {unit} -n 50`")
    record = OperationRecord(deployment, verb, unit, invocation, time.time())
    record.save(state_dir)
    return record


# --- inside the unit ------------------------------------------------------------------------------


class _PriorityPrefix(io.TextIOBase):
    """A text stream that starts every line with journald's ``<N>`` priority prefix."""

    def __init__(self, stream: TextIO, priority: int) -> None:
        self._stream = stream
        self._prefix = f"<{priority}>"
        self._line_start = True

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            if self._line_start:
                out.append(self._prefix)
            out.append(piece)
            self._line_start = piece.endswith("\n")
        self._stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False


def in_worker(env: Mapping[str, str] | None = None) -> bool:
    return bool((os.environ if env is None else env).get(WORKER_ENV))


def run_as_worker(run: Callable[[], int]) -> int:
    """Run a verb inside its unit: stderr lines marked for the journal, the exit code as the last line."""
    sys.stderr = _PriorityPrefix(sys.stderr, _STDERR_PRIORITY)  # type: ignore[assignment]
    code = ExitCode.BUG
    try:
        code = run()
    finally:
        sys.stderr.flush()
        print(f"{EXIT_MARK}{code}", flush=True)
    return code


# --- following it ---------------------------------------------------------------------------------


@dataclass
class _Lines:
    """What the follower saw: the exit code once the worker wrote it."""

    exit_code: int | None = None
    last_seen: float = 0.0


async def _read_journal(argv: list[str], seen: _Lines, out: TextIO, err: TextIO) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                limit=16 * 1024 * 1024)
    assert proc.stdout is not None
    try:
        while raw := await proc.stdout.readline():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if "_SYSTEMD_INVOCATION_ID" not in entry:  # PID 1's own lines about the unit
                continue
            text = decode_message(entry.get("MESSAGE"))
            seen.last_seen = time.monotonic()
            if text.startswith(EXIT_MARK):
                seen.exit_code = int(text[len(EXIT_MARK):])
                return
            stream = err if int(entry.get("PRIORITY", 6)) <= _STDERR_PRIORITY else out
            stream.write(text + "\n")
            stream.flush()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def _running(systemd: Systemd, record: OperationRecord) -> bool:
    state = await systemd.unit_state(record.unit)
    return state.invocation_id == record.invocation_id and state.active_state not in ("inactive", "failed")


async def follow(endpoint: Endpoint, record: OperationRecord, *, out: TextIO = sys.stdout,
                 err: TextIO = sys.stderr, interactive: bool | None = None) -> int:
    """Print the operation's lines until it ends; its exit code, ``DETACHED`` or ``OPERATION_LOST``.

    Ctrl-C asks whether to detach (the default; always so without a terminal) or abort (SIGTERM to the
    operation, which rolls back, then keep following)."""
    interactive = sys.stdin.isatty() if interactive is None else interactive
    seen = _Lines()
    argv = journal_argv(endpoint.journal_command, record.invocation_id, follow=True)
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    reader = asyncio.ensure_future(_read_journal(argv, seen, out, err))
    ctrl_c = asyncio.ensure_future(interrupted.wait())
    try:
        async with await endpoint.connect() as systemd:
            ended_at: float | None = None
            while not reader.done():
                await asyncio.wait({reader, ctrl_c}, timeout=_POLL_S, return_when=asyncio.FIRST_COMPLETED)
                if ctrl_c.done():
                    interrupted.clear()
                    ctrl_c = asyncio.ensure_future(interrupted.wait())
                    if not await _abort_wanted(interactive, err):
                        return _detached(record, err)
                    await systemd.kill(record.unit, signal.SIGTERM)
                    err.write(f"sent SIGTERM to {record.unit}: it rolls back now; following it\n")
                if reader.done():
                    break
                if ended_at is None and not await _running(systemd, record):
                    ended_at = time.monotonic()
                if ended_at is not None and time.monotonic() - max(ended_at, seen.last_seen) > _DRAIN_S:
                    break
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        ctrl_c.cancel()
        if not reader.done():
            reader.cancel()
        try:
            await reader
        except asyncio.CancelledError:
            pass
    if seen.exit_code is None:
        err.write(f"error: {record.unit} ended without a result (killed?)\n"
                  f"hint: `deployctl history -d {record.deployment}` shows what the ledger recorded;"
                  f" `journalctl _SYSTEMD_INVOCATION_ID={record.invocation_id}` the whole log\n")
        return ExitCode.OPERATION_LOST
    return seen.exit_code


async def _abort_wanted(interactive: bool, err: TextIO) -> bool:
    if not interactive:
        return False
    err.write("\ndetach (the operation goes on) or abort (roll back)? [D/a] ")
    err.flush()
    answer = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return answer.strip().lower() in ("a", "abort")


def _detached(record: OperationRecord, err: TextIO) -> int:
    err.write(f"\ndetached: {record.unit} goes on; `deployctl attach {record.deployment}` follows it again\n")
    return ExitCode.DETACHED


async def attach(endpoint: Endpoint, state_dir: Path, deployment: str) -> int:
    return await follow(endpoint, OperationRecord.load(state_dir, deployment))

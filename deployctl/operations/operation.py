"""Long operations (promote, rollback) owned by PID 1: started as a transient unit, followed through the journal.

``launch`` starts ``deployctl VERB …`` as ``deployctl-VERB-DEPLOYMENT.service`` (what ``systemd-run
--unit=… --collect`` does), so the operation outlives the terminal, the SSH session or the laptop that
asked for it. ``follow`` prints the unit's lines as they are written (stdout lines to stdout, stderr lines
to stderr) and returns the operation's exit code, which the worker writes as its last line
(``EXIT_MARK``): with ``--collect`` the unit and its ExecMainStatus are gone the moment it ends, the
journal is not. ``attach`` is ``follow`` again, from the operation's first line, found by the record the
launcher left in the state directory.

Records are kept per operation (``operations/DEPLOYMENT/ID.json``), never one per deployment: a second
caller's refused operation (its worker found the lock held: exit 4) must not hide the one that runs. The
worker writes its exit code next to its record (``ID.exit``), so ``attach`` can skip refused ones.

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
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TextIO

from deployctl.adapters.aio import kill_child
from deployctl.adapters.journal import decode_message, journal_argv
from deployctl.adapters.systemd import Systemd
from deployctl.adapters.transient import TransientService, escape_unit_part, operation_unit
from deployctl.errors import Busy, ExitCode, InputError, SystemdError, UnitExists
from deployctl.operations.restart import Endpoint

WORKER_ENV = "DEPLOYCTL_OPERATION"
RESULT_ENV = "DEPLOYCTL_OPERATION_RESULT"  # where the worker writes its exit code (next to its record)
_KEPT_RECORDS = 20  # per deployment: attach needs the newest few, history lives in the ledger
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
    id: str

    @staticmethod
    def folder(state_dir: Path, deployment: str) -> Path:
        return state_dir / "operations" / escape_unit_part(deployment)

    @staticmethod
    def result_path(state_dir: Path, deployment: str, op_id: str) -> Path:
        return OperationRecord.folder(state_dir, deployment) / f"{op_id}.exit"

    def save(self, state_dir: Path) -> None:
        folder = self.folder(state_dir, self.deployment)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.id}.json").write_text(json.dumps(asdict(self)))
        for old in operation_records(state_dir, self.deployment)[:-_KEPT_RECORDS]:
            for suffix in (".json", ".exit"):
                (folder / f"{old.id}{suffix}").unlink(missing_ok=True)

    def exit_code(self, state_dir: Path) -> int | None:
        """What the worker said it exited with; None while it runs (or if it was killed before it could say)."""
        try:
            return int(self.result_path(state_dir, self.deployment, self.id).read_text())
        except (OSError, ValueError):
            return None


def operation_records(state_dir: Path, deployment: str) -> list[OperationRecord]:
    """``deployment``'s operations started in a unit on this host, oldest first."""
    found = []
    for path in OperationRecord.folder(state_dir, deployment).glob("*.json"):
        try:
            found.append(OperationRecord(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue  # half-written or from another version: not one to follow
    return sorted(found, key=lambda r: r.started)


def new_operation_id(verb: str) -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{verb}-{uuid.uuid4().hex[:6]}"


def unit_environment(env: Mapping[str, str], unit: str) -> dict[str, str]:
    passed = {k: v for k, v in env.items()
              if (k in PASSED_ENV or k.startswith("DEPLOYCTL_")) and k not in (WORKER_ENV, RESULT_ENV)}
    return {**passed, WORKER_ENV: unit, "PYTHONUNBUFFERED": "1"}


def worker_service(verb: str, deployment: str, argv: Sequence[str], env: Mapping[str, str], cwd: str,
                   stop_timeout_s: float, result_path: Path, remove_after: str | None = None) -> TransientService:
    unit = operation_unit(verb, deployment)
    return TransientService(argv=[sys.executable, "-m", "deployctl", *argv],
                            description=f"deployctl {verb} {deployment}",
                            environment={**unit_environment(env, unit), RESULT_ENV: str(result_path.resolve())},
                            working_directory=cwd, stop_timeout_s=stop_timeout_s, remove_after=remove_after)


async def launch(endpoint: Endpoint, state_dir: Path, verb: str, deployment: str, service: TransientService,
                 op_id: str) -> OperationRecord:
    unit = operation_unit(verb, deployment)
    busy = Busy(f"{unit} is running already", hint=f"`deployctl attach {deployment}` follows it")
    async with await endpoint.connect() as systemd:
        state = await systemd.unit_state(unit)
        if state.active_state in ("active", "activating", "deactivating"):
            raise busy
        await systemd.reset_failed(unit)
        try:
            (await systemd.start_transient(unit, service.properties())).check()
        except UnitExists:  # another caller started it between our look and our start
            raise busy from None
        invocation = (await systemd.unit_state(unit)).invocation_id
        if not invocation:  # it ended (and was collected) before we could ask: only the journal knows why
            raise SystemdError(f"{unit} ended as soon as it started",
                               hint=f"see `journalctl -u {unit} -n 50`")
    record = OperationRecord(deployment, verb, unit, invocation, time.time(), op_id)
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
        result = os.environ.get(RESULT_ENV)
        if result:
            try:
                Path(result).write_text(str(int(code)))
            except OSError:  # attach then judges it by the journal alone
                pass
    return code


# --- following it ---------------------------------------------------------------------------------


@dataclass
class _Lines:
    """What the follower saw: the exit code once the worker wrote it."""

    exit_code: int | None = None
    last_seen: float = 0.0


async def _read_journal(argv: list[str], seen: _Lines, out: TextIO, err: TextIO) -> None:
    # Its own session: a Ctrl-C in the terminal goes to the terminal's process group, and must not kill
    # the reader before the follower has decided to detach or abort (then follows the rollback to its end).
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                limit=16 * 1024 * 1024, start_new_session=True)
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
        kill_child(proc)
        await proc.wait()


async def _running(systemd: Systemd, record: OperationRecord) -> bool:
    state = await systemd.unit_state(record.unit)
    return state.invocation_id == record.invocation_id and state.active_state not in ("inactive", "failed")


async def follow(endpoint: Endpoint, record: OperationRecord, *, out: TextIO = sys.stdout,
                 err: TextIO = sys.stderr, interactive: bool | None = None, abort_on_interrupt: bool = False,
                 abort_now: bool = False) -> int:
    """Print the operation's lines until it ends; its exit code, ``DETACHED`` or ``OPERATION_LOST``.

    Ctrl-C (SIGINT) asks whether to detach (the default) or abort (SIGTERM to the operation, which rolls
    back, then keep following to its end and exit with its code). Without a terminal nobody can answer:
    it detaches, or aborts with ``abort_on_interrupt``. ``abort_now``: abort at once and print only what
    follows (``deployctl -H``'s Ctrl-C without a terminal, over a second connection)."""
    interactive = sys.stdin.isatty() if interactive is None else interactive
    seen = _Lines()
    argv = journal_argv(endpoint.journal_command, record.invocation_id, follow=True,
                        since=time.time() if abort_now else None)
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    reader = asyncio.ensure_future(_read_journal(argv, seen, out, err))
    ctrl_c = asyncio.ensure_future(interrupted.wait())
    try:
        async with await endpoint.connect() as systemd:
            ended_at: float | None = None
            if abort_now and await _running(systemd, record):
                await systemd.kill(record.unit, signal.SIGTERM)
                err.write(f"sent SIGTERM to {record.unit}: it rolls back now; following it\n")
            while not reader.done():
                await asyncio.wait({reader, ctrl_c}, timeout=_POLL_S, return_when=asyncio.FIRST_COMPLETED)
                if ctrl_c.done():
                    interrupted.clear()
                    ctrl_c = asyncio.ensure_future(interrupted.wait())
                    if not (abort_on_interrupt or await _abort_wanted(interactive, err)):
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


async def attach(endpoint: Endpoint, state_dir: Path, deployment: str, wanted: str | None = None, *,
                 abort_on_interrupt: bool = False, abort_now: bool = False) -> int:
    """Follow ``wanted`` (an operation id or invocation id, or a prefix of one), else the one that runs, else
    the newest that was not refused (exit 4: its worker found the deployment busy and changed nothing)."""
    records = operation_records(state_dir, deployment)
    if not records:
        raise InputError(f"no operation of {deployment} was started in a unit on this host",
                         hint=f"`deployctl history -d {deployment}` lists what ran")
    if wanted:
        matches = [r for r in records if r.id.startswith(wanted) or r.invocation_id.startswith(wanted)]
        if len(matches) != 1:
            known = ", ".join(r.id for r in records[-5:])
            raise InputError(f"{'no' if not matches else 'more than one'} operation of {deployment} matches {wanted!r}",
                             hint=f"the newest: {known}")
        return await follow(endpoint, matches[0], abort_on_interrupt=abort_on_interrupt, abort_now=abort_now)
    async with await endpoint.connect() as systemd:
        running = {r.id for r in records if await _running(systemd, r)}
    chosen = choose_operation(records, running, {r.id: r.exit_code(state_dir) for r in records})
    if chosen.id in running:
        return await follow(endpoint, chosen, abort_on_interrupt=abort_on_interrupt, abort_now=abort_now)
    return await follow(endpoint, chosen)  # it has ended: nothing to abort, its whole log and its exit code


def choose_operation(records: Sequence[OperationRecord], running: set[str],
                     exit_codes: Mapping[str, int | None]) -> OperationRecord:
    """The operation ``attach`` follows (``records`` oldest first, not empty): the newest running one, else
    the newest that was not refused as busy (its worker found the lock held and changed nothing)."""
    for record in reversed(records):
        if record.id in running:
            return record
    return next((r for r in reversed(records) if exit_codes.get(r.id) != ExitCode.BUSY), records[-1])

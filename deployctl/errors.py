"""deployctl's exception tree and the exit codes it maps to.

Every adapter translates its library's errors into one of these at its boundary, so the CLI's single
error policy (``deployctl.cli``) is the only place that turns an exception into an exit code.

    DeployctlError                70 unless a subclass says otherwise (or the environment caused it)
    ├── InputError                2  bad inventory, bad flags, missing file
    │   └── UsageError            2  the command line itself (argparse)
    ├── PreflightRefused          3  a pre-flight check found an ERROR
    ├── Busy                      4  another operation holds the deployment's lock
    ├── EnvironmentUnfit          5  not root, no system bus, server unreachable, a tool missing, stdout full
    ├── SystemdError              6  systemd refused or failed the operation
    │   ├── UnitNotFound
    │   ├── BadUnitSetting
    │   ├── AccessDenied          5  (polkit/root: the environment, not the request)
    │   └── JobFailed             6  the unit's job failed or the server never became ready
    └── RollbackFailed            12 the known-good unit could not be brought back

A ``DeployctlError`` at exit 70 that an ``OSError`` caused (permission denied, connection refused, a
missing executable) is the environment's doing, not a bug: :func:`exit_code_of` gives it 5.

Exit 1 is only ``diff``'s "they differ", as diff(1) and ``git diff --exit-code`` use it; a bug has its own
code, 70 (sysexits.h's EX_SOFTWARE, "internal software error"), so a script can tell the two apart.
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    DIFFERENT = 1  # diff: the profiles differ (diff(1)'s 1); nothing else exits 1
    BAD_INPUT = 2
    PREFLIGHT_REFUSED = 3
    BUSY = 4
    ENVIRONMENT = 5
    FAILED = 6
    REJECTED = 10
    INCONCLUSIVE = 11
    ROLLBACK_FAILED = 12
    # --- deployctl canary (issue 20): the watch's own outcomes; a tried candidate exits as promote
    #     does (10 rejected, 11 inconclusive, 12 rollback failed), busy is 4 ---
    CANARY_DEGRADED = 20  # the live release measures worse than at its promotion, or stepped down
    CANARY_PROMOTED = 21  # the pending candidate was tried and kept
    CANARY_ROLLED_BACK = 22  # degraded, and the release before it measured better now: it is live again
    CANARY_UNCLEAR = 23  # the watch could not decide (inconclusive beyond its budget): neither ok nor degraded
    BUG = 70  # sysexits.h EX_SOFTWARE: an internal error of deployctl, with a traceback on stderr
    INTERRUPTED = 130
    # --- operations in transient units, and `deployctl -H` over SSH (issue 15): 30-34 ---
    DETACHED = 30  # the operation goes on in its unit on the host; `deployctl attach` follows it again
    OPERATION_LOST = 31  # the operation's process ended without a result (killed); the ledger says what
    SSH_UNREACHABLE = 32  # no SSH connection to the host (name, route, port, timeout)
    SSH_REFUSED = 33  # the host refused the login (key, user)
    REMOTE_INCOMPATIBLE = 34  # the host's deployctl is missing or of another version
    SSH_LINK_LOST = 35  # the verb started on the host, then the SSH connection dropped; `attach` follows it


# One line per code, in the order --help, the README and the man page list them.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (ExitCode.OK, "done (for promote: kept, or nothing to change)"),
    (ExitCode.DIFFERENT, "diff: the profiles differ (as diff(1); no other verb exits 1)"),
    (ExitCode.BAD_INPUT, "bad input: command line, inventory, policy, file, state directory"),
    (ExitCode.PREFLIGHT_REFUSED, "refused by pre-flight checks"),
    (ExitCode.BUSY, "busy: another operation holds the deployment's lock"),
    (ExitCode.ENVIRONMENT, "environment not fit: not root, no system bus, server unreachable, tool missing"),
    (ExitCode.FAILED, "systemd refused or failed the operation (job failed, server not ready)"),
    (ExitCode.REJECTED, "candidate rejected and rolled back"),
    (ExitCode.INCONCLUSIVE, "inconclusive: the baseline is kept"),
    (ExitCode.ROLLBACK_FAILED, "rollback failed: manual action needed"),
    (ExitCode.CANARY_DEGRADED, "canary: the live release is degraded"),
    (ExitCode.CANARY_PROMOTED, "canary: the pending candidate was tried and kept"),
    (ExitCode.CANARY_ROLLED_BACK, "canary: the live release was degraded; the release before it measured better"
                                  " now and is live again"),
    (ExitCode.CANARY_UNCLEAR, "canary: the watch could not decide (neither ok nor degraded); the next run looks"
                              " again sooner"),
    (ExitCode.DETACHED, "detached: the operation goes on in its unit (deployctl attach follows it again)"),
    (ExitCode.OPERATION_LOST, "the operation was killed before it reported how it ended (see the ledger)"),
    (ExitCode.SSH_UNREACHABLE, "-H: the host is unreachable over SSH"),
    (ExitCode.SSH_REFUSED, "-H: the SSH login was refused"),
    (ExitCode.REMOTE_INCOMPATIBLE, "-H: the host's deployctl is missing or of another version"),
    (ExitCode.SSH_LINK_LOST, "-H: the verb started on the host, then the SSH connection was lost"),
    (ExitCode.BUG, "a bug in deployctl (a traceback goes to stderr; please report it)"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C, SIGTERM, deployctl abort)"),
)


def exit_codes_text(indent: str = "  ") -> str:
    return "\n".join(f"{indent}{code:>3}  {meaning}" for code, meaning in EXIT_CODES)


class DeployctlError(Exception):
    """An expected failure: printed as ``error: message`` (+ ``hint: …``), never with a traceback."""

    exit_code: int = ExitCode.BUG
    # The verb printed its result first, and under --json that document carries the error, hint and
    # exit code: nothing more is printed then (stdout stays one JSON document, stderr stays empty).
    after_result: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(DeployctlError):
    exit_code = ExitCode.BAD_INPUT


class UsageError(InputError):
    """The command line does not parse; the hint is the verb's usage line."""


class PreflightRefused(DeployctlError):
    exit_code = ExitCode.PREFLIGHT_REFUSED


class Busy(DeployctlError):
    exit_code = ExitCode.BUSY


class Interrupted(DeployctlError):
    """Stopped by a signal (Ctrl-C, SIGTERM, ``deployctl abort``) where nothing had been changed yet."""

    exit_code = ExitCode.INTERRUPTED


class EnvironmentUnfit(DeployctlError):
    exit_code = ExitCode.ENVIRONMENT


class SystemdError(DeployctlError):
    exit_code = ExitCode.FAILED


class UnitNotFound(SystemdError):
    pass


class BadUnitSetting(SystemdError):
    pass


class UnitExists(SystemdError):
    """A transient unit of that name is loaded already (another caller started it first)."""


class AccessDenied(SystemdError):
    exit_code = ExitCode.ENVIRONMENT


class JobFailed(SystemdError):
    def __init__(self, message: str, *, result: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.result = result


class RollbackFailed(DeployctlError):
    exit_code = ExitCode.ROLLBACK_FAILED


def _environmental(exc: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (PermissionError, FileNotFoundError, ConnectionError, TimeoutError)):
            return True
        if isinstance(cause, OSError) and type(cause) is OSError:  # e.g. ENOSPC, ENOTCONN, EACCES raw
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def exit_code_of(exc: DeployctlError) -> int:
    """The exit code of an expected failure: its class's, except that exit 70 caused by the OS is 5."""
    if exc.exit_code in (ExitCode.BUG, ExitCode.FAILED) and _environmental(exc):
        return ExitCode.ENVIRONMENT
    return exc.exit_code


class RemoteError(DeployctlError):
    """``deployctl -H``: the host could not be reached, refused us, or runs another deployctl."""

    def __init__(self, message: str, *, exit_code: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code

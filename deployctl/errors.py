"""deployctl's exception tree and the exit codes it maps to.

Every adapter translates its library's errors into one of these at its boundary, so the CLI's single
error policy (``deployctl.cli``) is the only place that turns an exception into an exit code.

    DeployctlError                exit 1 unless a subclass says otherwise
    ├── InputError                2  bad inventory, bad flags, missing file
    ├── PreflightRefused          3  a pre-flight check found an ERROR
    ├── Busy                      4  another operation holds the deployment's lock
    ├── SystemdError              1  D-Bus / unit-file trouble
    │   ├── UnitNotFound
    │   ├── BadUnitSetting
    │   ├── AccessDenied
    │   └── JobFailed
    └── RollbackFailed            12 the known-good unit could not be brought back
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    BUG = 1
    BAD_INPUT = 2
    PREFLIGHT_REFUSED = 3
    BUSY = 4
    REJECTED = 10
    INCONCLUSIVE = 11
    ROLLBACK_FAILED = 12
    # --- deployctl canary (issue 20): the watch's own outcomes; a tried candidate exits as promote
    #     does (10 rejected, 11 inconclusive, 12 rollback failed), busy is 4 ---
    CANARY_DEGRADED = 20  # the live release measures worse than at its promotion, or stepped down
    CANARY_PROMOTED = 21  # the pending candidate was tried and kept
    INTERRUPTED = 130
    # --- operations in transient units, and `deployctl -H` over SSH (issue 15): 30-34 ---
    DETACHED = 30  # the operation goes on in its unit on the host; `deployctl attach` follows it again
    OPERATION_LOST = 31  # the operation's process ended without a result (killed); the ledger says what
    SSH_UNREACHABLE = 32  # no SSH connection to the host (name, route, port, timeout)
    SSH_REFUSED = 33  # the host refused the login (key, user)
    REMOTE_INCOMPATIBLE = 34  # the host's deployctl is missing or of another version


class DeployctlError(Exception):
    """An expected failure: printed as ``error: message`` (+ ``hint: …``), never with a traceback."""

    exit_code: int = ExitCode.BUG

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(DeployctlError):
    exit_code = ExitCode.BAD_INPUT


class PreflightRefused(DeployctlError):
    exit_code = ExitCode.PREFLIGHT_REFUSED


class Busy(DeployctlError):
    exit_code = ExitCode.BUSY


class SystemdError(DeployctlError):
    pass


class UnitNotFound(SystemdError):
    pass


class BadUnitSetting(SystemdError):
    pass


class AccessDenied(SystemdError):
    pass


class JobFailed(SystemdError):
    def __init__(self, message: str, *, result: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.result = result


class RollbackFailed(DeployctlError):
    exit_code = ExitCode.ROLLBACK_FAILED


class RemoteError(DeployctlError):
    """``deployctl -H``: the host could not be reached, refused us, or runs another deployctl."""

    def __init__(self, message: str, *, exit_code: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code

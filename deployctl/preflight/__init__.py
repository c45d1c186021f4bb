"""Pre-flight checks: refuse a bad candidate before it costs a restart (docs/preflight.md). Used by promote
(the runner's first action), bisect and the ``check`` verb.

Public API: :func:`run_preflight` → :class:`PreflightReport` (``findings``, ``errors``, ``warnings``,
``refuses(strict)``); :class:`Finding` (level ERROR/WARN/INFO, code, message, source, hint).
"""

from deployctl.preflight.report import Finding, PreflightReport
from deployctl.preflight.run import run_preflight

__all__ = ["Finding", "PreflightReport", "run_preflight"]

"""The ledger: every release and every step of every promote, in SQLite (WAL) on the host.

The only importer of ``sqlite3``: this package, a module per part — ``location`` (the state directory),
``schema`` (tables, migrations), ``store`` (the connection, errors), ``releases``, ``events``,
``benchmarks``, ``restart_pairs``, ``spending``. Lives in the state directory (``--state-dir``, ``$DEPLOYCTL_STATE_DIR``,
default ``/var/lib/deployctl``) next to the locks, because the evidence belongs where the GPUs are.

Tables:
- ``releases``: one row per promote / rollback / adoption of the installed unit: deployment, profile,
  unit text and hash, flags and environment (secret-looking values redacted), who, when, the machine's
  state (JSON, saved *before* each side effect), startup reports, verdict, reasons and result.
- ``events``: the intent of each action before it runs and its outcome after, in order.
- ``benchmarks``: raw benchmark results (samples included) with the unit hash, host and SGLang version
  they measured and, for a baseline, the whole fingerprint (``judge.reuse.BaselineFingerprint``: GPU
  model, driver, power limit, clocks policy too), so a stored baseline is reused only where it still holds.
  A reused baseline's row (the stored trials plus the confirmation trials) names the release it reused.

Secrets are never stored: every value written (unit text, flags, environment, machine state, startup
reports, events, benchmark results) first goes through ``deployctl.facts.secrets``. The state directory
is created 0700 and the ledger (with its WAL and shared-memory files) is 0600: its rows are the
operator's evidence, not the host's.
"""

from __future__ import annotations

from deployctl.adapters.ledger.benchmarks import Benchmarks
from deployctl.adapters.ledger.events import Events
from deployctl.adapters.ledger.location import DEFAULT_STATE_DIR, LEDGER_FILE, resolve_state_dir
from deployctl.adapters.ledger.releases import Releases, who_from_env
from deployctl.adapters.ledger.restart_pairs import RestartPairs
from deployctl.adapters.ledger.spending import Spending
from deployctl.adapters.ledger.store import LedgerError
from deployctl.decisions.records import Release

__all__ = ["DEFAULT_STATE_DIR", "LEDGER_FILE", "Ledger", "LedgerError", "live_release", "resolve_state_dir",
           "who_from_env"]


class Ledger(Releases, Events, Benchmarks, RestartPairs, Spending):
    """One SQLite database per state directory; every write is its own committed transaction.

    Every ``sqlite3`` error becomes a ``LedgerError`` that names the fault (locked, full, damaged, I/O)."""


def live_release(ledger: Ledger, deployment: str) -> Release | None:
    """The release whose unit is installed now (kept, rolled back to, or adopted), for ``deployctl status``."""
    return ledger.live_release(deployment)

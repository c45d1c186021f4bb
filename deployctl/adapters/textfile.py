"""The canary's Prometheus textfile for node_exporter's textfile collector.

Built with the official ``prometheus_client`` in a fresh ``CollectorRegistry`` per run (nothing global
leaks between deployments) and written with ``write_to_textfile``, which writes a temporary file and
renames it, so node_exporter never reads half a file. One file per deployment, so ``--all`` runs and
single runs never clobber each other's series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from prometheus_client import CollectorRegistry, Gauge, Info, write_to_textfile
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from deployctl.errors import DeployctlError

DEFAULT_TEXTFILE_DIR = Path("/var/lib/prometheus/node-exporter")
OUTCOMES = ("ok", "degraded", "unclear", "rolled_back", "promoted", "rejected", "inconclusive", "refused", "rollback_failed",
            "busy", "error")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class CanaryMetrics:
    deployment: str
    outcome: str  # one of OUTCOMES
    finished_at: float  # unix time
    live_release: int | None = None
    live_unit_hash: str | None = None
    tok_s: dict[int, float] = field(default_factory=dict)  # concurrency → output tok/s of this watch
    change_pct: dict[int, float] = field(default_factory=dict)  # concurrency → vs its reference
    degradations: int = 0  # degraded watches of this deployment, all releases, from the ledger
    unclear: int = 0  # watches that could not decide, all releases, from the ledger
    rollbacks: int = 0  # rejected / inconclusive promotes rolled back, from the ledger
    degraded_rollbacks: int = 0  # degraded live releases replaced by the release before them, from the ledger
    webhook_failures: int = 0  # the canary's webhook calls that failed, from the ledger


def registry_for(m: CanaryMetrics) -> CollectorRegistry:
    reg = CollectorRegistry()
    d = m.deployment
    Gauge("deployctl_canary_last_run_timestamp_seconds", "When the last canary run of the deployment ended.",
          ["deployment"], registry=reg).labels(d).set(m.finished_at)
    outcome = Gauge("deployctl_canary_outcome", "The last canary run's outcome: 1 for the one it had, 0 for the others.",
                    ["deployment", "outcome"], registry=reg)
    for name in OUTCOMES:
        outcome.labels(d, name).set(1 if name == m.outcome else 0)
    if m.live_release is not None:
        Gauge("deployctl_canary_live_release_id", "The ledger id of the live release.", ["deployment"],
              registry=reg).labels(d).set(m.live_release)
        Info("deployctl_canary_live_release", "The live release.", ["deployment"], registry=reg).labels(d).info(
            {"release": str(m.live_release), "unit_hash": (m.live_unit_hash or "")[:12]})
    tok = Gauge("deployctl_canary_output_tokens_per_second", "Output tokens per second of the last watch, per level.",
                ["deployment", "concurrency"], registry=reg)
    for c, v in sorted(m.tok_s.items()):
        tok.labels(d, str(c)).set(v)
    change = Gauge("deployctl_canary_change_ratio", "The last watch against the release's reference (-0.05 is 5 % worse).",
                   ["deployment", "concurrency"], registry=reg)
    for c, v in sorted(m.change_pct.items()):
        change.labels(d, str(c)).set(v / 100.0)
    reg.register(_LedgerCounters(m))
    return reg


class _LedgerCounters(Collector):
    """Totals counted from the ledger each run (so they survive reboots), as counters without ``_created``."""

    def __init__(self, m: CanaryMetrics) -> None:
        self.m = m

    def collect(self) -> Iterable[CounterMetricFamily]:
        for name, doc, value in (
            ("deployctl_canary_degradations", "Degraded watches, all releases of the deployment.", self.m.degradations),
            ("deployctl_canary_unclear", "Watches that could not decide (neither ok nor degraded), all releases of "
             "the deployment.", self.m.unclear),
            ("deployctl_rollbacks", "Candidates rolled back (rejected or inconclusive).", self.m.rollbacks),
            ("deployctl_canary_rollbacks", "Degraded live releases the canary rolled back to the release before "
             "them, which measured better (policy.canary.on_degraded: rollback).", self.m.degraded_rollbacks),
            ("deployctl_canary_webhook_failures", "The canary's webhook calls that failed (each is in the ledger "
             "and the run's journal entry).", self.m.webhook_failures),
        ):
            family = CounterMetricFamily(name, doc, labels=["deployment"])
            family.add_metric([self.m.deployment], value)
            yield family


def textfile_path(directory: Path, deployment: str) -> Path:
    return directory / f"deployctl_canary_{_SAFE.sub('_', deployment)}.prom"


def write(directory: Path, metrics: CanaryMetrics) -> Path:
    path = textfile_path(directory, metrics.deployment)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(path), registry_for(metrics))
    except OSError as exc:
        raise DeployctlError(f"cannot write the metrics file {path}: {exc}",
                             hint="point --textfile-dir at node_exporter's --collector.textfile.directory") from exc
    path.chmod(0o644)  # node_exporter runs as its own user; the canary's UMask=0077 would hide it
    return path

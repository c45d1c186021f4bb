"""The price of a promote on this site, from its ledger's history (``deployctl.decisions.cost`` decides)."""

from __future__ import annotations

from dataclasses import replace

from deployctl.adapters.ledger import LEDGER_FILE, Ledger, LedgerError
from deployctl.decisions.cost import CostEstimate, PastPromote, estimate, server_gpus
from deployctl.decisions.evidence import Plan, bench_key
from deployctl.operations.site import Site


def promote_cost(site: Site, plan: Plan, ledger: Ledger | None = None) -> CostEstimate:
    """Expected and worst-case GPU time of promoting ``plan``, priced from what this deployment's promotes on
    this host spent (in ``ledger``, else the site's); a ledger that does not exist yet is not created (a dry run
    changes nothing)."""
    gpus = server_gpus(plan.flags, site.inv.host_of(site.deployment).gpus.count)
    if ledger is not None:
        return estimate(plan.policy, _history(ledger, site, plan), gpus)
    if not (site.state_dir / LEDGER_FILE).exists():
        return estimate(plan.policy, (), gpus)
    try:
        with Ledger.open(site.state_dir) as opened:
            history = _history(opened, site, plan)
    except LedgerError as exc:
        return replace(estimate(plan.policy, (), gpus), basis=f"defaults: the ledger could not be read ({exc.message})")
    return estimate(plan.policy, history, gpus)


def _history(ledger: Ledger, site: Site, plan: Plan) -> list[PastPromote]:
    return ledger.past_promotes(deployment=site.name, host=plan.host, bench_key=bench_key(plan.policy))

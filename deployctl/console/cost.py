"""The price of a promote on this site, from its ledger's history (``deployctl.decisions.cost`` decides)."""

from __future__ import annotations

from dataclasses import replace

from deployctl.adapters.ledger import LEDGER_FILE, Ledger, LedgerError
from deployctl.decisions.cost import CostEstimate, estimate, server_gpus
from deployctl.decisions.evidence import Plan, bench_key
from deployctl.operations.site import Site


def promote_cost(site: Site, plan: Plan) -> CostEstimate:
    """Expected and worst-case GPU time of promoting ``plan``, priced from what this deployment's promotes on
    this host spent; a ledger that does not exist yet is not created (a dry run changes nothing)."""
    gpus = server_gpus(plan.flags, site.inv.host_of(site.deployment).gpus.count)
    if not (site.state_dir / LEDGER_FILE).exists():
        return estimate(plan.policy, (), gpus)
    try:
        with Ledger.open(site.state_dir) as ledger:
            history = ledger.past_promotes(deployment=site.name, host=plan.host, bench_key=bench_key(plan.policy))
    except LedgerError as exc:
        return replace(estimate(plan.policy, (), gpus), basis=f"defaults: the ledger could not be read ({exc.message})")
    return estimate(plan.policy, history, gpus)

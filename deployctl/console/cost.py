"""The price of a promote on this site, from its ledger's history (``deployctl.decisions.cost`` decides)."""

from __future__ import annotations

from dataclasses import replace

from deployctl.adapters.ledger import LEDGER_FILE, Ledger, LedgerError
from deployctl.decisions.cost import CostEstimate, estimate, server_gpus
from deployctl.decisions.evidence import Plan, bench_key
from deployctl.operations.site import Site


def promote_cost(site: Site, plan: Plan, baseline_max_age_s: float, ledger: Ledger | None = None) -> CostEstimate:
    """Expected and worst-case GPU time of promoting ``plan``, priced from what this deployment's promotes on
    this host spent (in ``ledger``, else the site's); a ledger that does not exist yet is not created (a dry run
    changes nothing). ``baseline_max_age_s``: how old a stored baseline the promote may reuse (0: none)."""
    gpus = server_gpus(plan.flags, site.inv.host_of(site.deployment).gpus.count)
    if ledger is not None:
        return _priced(ledger, site, plan, baseline_max_age_s, gpus)
    if not (site.state_dir / LEDGER_FILE).exists():
        return estimate(plan.policy, (), gpus)
    try:
        with Ledger.open(site.state_dir) as opened:
            return _priced(opened, site, plan, baseline_max_age_s, gpus)
    except LedgerError as exc:
        return replace(estimate(plan.policy, (), gpus), basis=f"defaults: the ledger could not be read ({exc.message})")


def _priced(ledger: Ledger, site: Site, plan: Plan, baseline_max_age_s: float, gpus: int) -> CostEstimate:
    key = bench_key(plan.policy)
    stored = ledger.stored_baseline(unit_hash=plan.known_good_hash or "", bench_key=key, host=plan.host)
    # Expected reused when recent enough; the server's fingerprint is checked only when the promote runs, and a
    # changed one (a new driver, SGLang version) measures a fresh baseline after all: the estimate says which.
    reuse = stored is not None and stored.fingerprint is not None and ledger.now() - stored.at <= baseline_max_age_s
    history = ledger.past_promotes(deployment=site.name, host=plan.host, bench_key=key)
    return estimate(plan.policy, history, gpus, reuse=reuse)

"""The canary's watch of the live release, wired: health; the server's own /metrics over a window while it
serves users (``deployctl.judge.passive``), else — idle, or no /metrics — a short sweep; judged against the
release's own reference taken the same way, the watch stored in the ledger, and the change points of the
release's watch series.

Every watch is a benchmark row of the live release (``watch``, or ``passive-watch``) plus a ``canary``
event with its verdict, so ``deployctl show`` and the next watch both read the same time series from the
ledger. A release's reference is fixed once chosen (a ``reference`` / ``passive-reference`` row): a
later promote attempt's baseline of the same unit never moves it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol, Sequence

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult
from deployctl.decisions.canary import Judged, ServerStart, WatchStart, version_identity
from deployctl.decisions.evidence import bench_key, version_key
from deployctl.decisions.records import Release
from deployctl.errors import EnvironmentUnfit
from deployctl.judge import passive
from deployctl.judge.watch import CheckVerdict, Health, WatchVerdict, level_means, watch_verdict, with_checks
from deployctl.live.protocols import Adapters
from deployctl.operations.site import Site
from deployctl.startup.report import StartupReport


WATCH = "watch"  # a synthetic watch (a sweep of ours): a benchmark row of the live release
PASSIVE_WATCH = "passive-watch"  # a watch read from the server's own /metrics under its users' load
REFERENCE = "reference"  # a pinned synthetic reference of the release (its first use, or `canary rebaseline`)
PASSIVE_REFERENCE = "passive-reference"  # a pinned passive reference, one per occupancy level
WEBHOOK_FAILED = "webhook-failed"  # a canary run's webhook call that failed (on the live release after the run)
TRIED = "tried"  # the canary's note on a release it started: the version identity it decided on
ROLLBACK_KIND = "canary-rollback"  # a degraded live release's trial of the release before it
JUDGED_RESULTS = ("kept", "rejected", "inconclusive", "refused", "rollback_failed")


@dataclass(frozen=True)
class WatchReport:
    release: Release
    sglang_version: str | None  # as the startup log states it (the stored measurements' column)
    version: str  # the version identity (deployctl.decisions.canary.version_identity): never None
    healthy: bool
    verdict: WatchVerdict | None  # None when the server was not healthy (nothing measured)
    result: BenchResult | None
    reference: BenchResult | None
    reference_from: str  # where the reference measurement came from, in words
    mode: str = ""  # "passive" (the server's /metrics) or "synthetic" (a sweep of ours)
    mode_reason: str = ""  # why that mode, in words
    start: WatchStart | None = None  # a synthetic watch's start and its reference's (a restart pair?)

    @property
    def health(self) -> Health:
        return self.verdict.health if self.healthy and self.verdict else Health.DEGRADED

    @property
    def reasons(self) -> tuple[str, ...]:
        if not self.healthy:
            return ("the live server does not answer /health",)
        return self.verdict.reasons if self.verdict else ()


class WatchCheck(Protocol):
    """Another look at the live release in the same watch, after its speed is measured (the output gate's
    subset of probes is one): its own ok / degraded / unclear and reasons, folded into the watch's
    (``deployctl.judge.watch.with_checks``: the worst outcome wins), stored and reported with it. Checks
    send requests, so they run only when the watch found the server idle (never while users are served)."""

    name: str

    async def __call__(self, site: Site, live: Release) -> CheckVerdict: ...


async def watch(ledger: Ledger, site: Site, adapters: Adapters, live: Release,
                checks: Sequence[WatchCheck] = ()) -> WatchReport:
    """Passive first: the server's own /metrics over the policy's window while it serves users; a synthetic
    sweep only when it served nobody over that window (or exports no /metrics). Then ``checks``."""
    report = await adapters.startup.live_report(site.unit)
    version = report.sglang_version if report else None
    if not await adapters.bench.healthy(site.url):
        ledger.record(live.id, "canary", "note", WATCH, {"health": Health.DEGRADED.value, "healthy": False})
        return WatchReport(live, version, version_identity(version_key(None, report)), False, None, None, None, "")
    facts = await adapters.host.server_facts(site.url)
    identity = version_identity(version_key(facts.sglang_version, report))
    scrapes, why = await _window(site)
    if scrapes and not passive.idle(scrapes):
        measured = _passive(ledger, site, live, version, identity, scrapes)
    else:
        measured = await _synthetic(ledger, site, adapters, live, version, identity, why)
    assert measured.verdict is not None
    if measured.mode == "passive":  # their probes would be requests of ours while users are served
        said = "not checked this time: users were being served, and its probes would be requests of ours"
        verdict = with_checks(measured.verdict, [(check.name, CheckVerdict(Health.OK, (said,))) for check in checks])
    else:
        verdict = with_checks(measured.verdict, [(check.name, await check(site, live)) for check in checks])
    ledger.record(live.id, "canary", "note", WATCH, {**_detail(verdict, measured.reference_from),
                                                     "sglang_version": identity, "mode": measured.mode,
                                                     "mode_reason": measured.mode_reason,
                                                     **(measured.start.to_dict() if measured.start else {})})
    return replace(measured, verdict=verdict)


async def _window(site: Site) -> tuple[list[passive.Scrape], str]:
    """The passive window's scrapes (none when the server exports no usable /metrics), and why a sweep of ours
    would be the way to measure it, in words."""
    # The scrapers (httpx) here and the verdict (numpy, scipy) in _synthetic, not at the top: `deployctl --help`
    # would pay for them through the canary verb (benchmarks/cli_startup.py).
    from deployctl.load.passive_watch import promql, query_window, scrape_once, scrape_window

    canary, api_key = site.policy.canary, site.api_key()
    if canary.prometheus is not None:
        scrapes = await query_window(canary.prometheus, canary.passive_window_s, site.policy.judge.max_trials)
        lacking = passive.exports_what_a_watch_needs(scrapes[0]) if scrapes else \
            f"Prometheus at {canary.prometheus.url} has no sglang: series for {promql(canary.prometheus)}"
        if lacking:
            return [], f"synthetic sweep: {lacking}"
        return scrapes, f"synthetic sweep: the server served nobody over the last {canary.passive_window_s:g} s"
    first = await scrape_once(site.url, api_key)
    lacking = passive.exports_what_a_watch_needs(first) if first is not None else \
        "it serves no /metrics: start SGLang with --enable-metrics to watch it from its users' traffic"
    if lacking:
        return [], f"synthetic sweep: {lacking}"
    scrapes = await scrape_window(site.url, api_key, canary.passive_window_s, site.policy.judge.max_trials)
    return scrapes, f"synthetic sweep: the server served nobody over {canary.passive_window_s:g} s"


def _passive(ledger: Ledger, site: Site, live: Release, version: str | None, identity: str,
             scrapes: list[passive.Scrape]) -> WatchReport:
    policy = site.policy
    result = passive.window_result(scrapes, policy.judge.max_trials, time.time())
    level = result.levels[0].concurrency if result.levels else 0
    source = f"Prometheus at {policy.canary.prometheus.url}" if policy.canary.prometheus else "the server's /metrics"
    mode_reason = f"passive: {source} over {policy.canary.passive_window_s:g} s of its users' load " \
                  f"(about {passive.occupancy(scrapes):.1f} running requests), no request of ours"
    pinned = [b for b in ledger.benches(live.id) if b.role == PASSIVE_REFERENCE
              and any(lv["concurrency"] == level for lv in b.result.get("levels", []))]
    key = dict(unit_hash=live.unit_hash, bench_key=bench_key(policy), host=site.host, sglang_version=version)
    comparable = sum(1 for lv in result.levels for t in lv.trials if t.valid)
    if pinned:
        reference, reference_from = BenchResult.from_dict(pinned[-1].result), \
            f"its passive reference at {level} running requests (release {live.id})"
    elif comparable >= policy.judge.min_trials:
        ledger.save_bench(live.id, PASSIVE_REFERENCE, result, **key)
        reference, reference_from = None, f"none yet at {level} running requests: this window is its reference"
    else:
        reference, reference_from = None, f"none yet at {level} running requests, and too little of this window " \
                                          "was comparable (users queued, or nothing generated) to be one"
    series: dict[int, list[float]] = {}
    watches = [BenchResult.from_dict(b.result) for b in ledger.benches(live.id) if b.role == PASSIVE_WATCH]
    for stored in [*watches, result]:
        for c, v in level_means(stored, policy.judge.metric).items():
            if c == level:
                series.setdefault(c, []).append(v)
    verdict = watch_verdict(reference, result, series, policy.judge, policy.canary)
    verdict = with_checks(verdict, [("errors", passive.error_check(result, reference, policy.bench.max_failure_rate))])
    ledger.save_bench(live.id, PASSIVE_WATCH, result, **key)
    return WatchReport(live, version, identity, True, verdict, result, reference, reference_from, "passive", mode_reason)


async def _synthetic(ledger: Ledger, site: Site, adapters: Adapters, live: Release, version: str | None,
                     identity: str, mode_reason: str) -> WatchReport:
    policy = site.policy
    start = await adapters.startup.live_start(site.unit)
    ref = _reference(ledger, site, live, version)
    reference, reference_from = ref.result, ref.said
    levels = policy.canary.levels
    if reference is not None and levels:
        reference = replace(reference, levels=tuple(lv for lv in reference.levels if lv.concurrency in levels))
    from deployctl.judge.verdict import judge

    result = await adapters.bench.sweep(site.url, levels, policy.judge.min_trials)
    for _ in range(policy.judge.max_trials - policy.judge.min_trials):
        if reference is None:
            break
        verdict = judge(reference, result, policy.judge)
        if verdict.final:
            break
        levels = sorted(verdict.more_trials)
        result = adapters.bench.merge(result, await adapters.bench.sweep(site.url, levels, dict(verdict.more_trials)))
    metric = policy.judge.metric
    series: dict[int, list[float]] = {}
    for stored in [*_watches(ledger, live), result]:
        for c, v in level_means(stored, metric).items():
            series.setdefault(c, []).append(v)
    verdict = watch_verdict(reference, result, series, policy.judge, policy.canary)
    row = ledger.save_bench(live.id, WATCH, result, unit_hash=live.unit_hash, bench_key=bench_key(policy),
                            host=site.host, sglang_version=version)
    measured = WatchStart(start, row, ref.id, ref.at, _noted_start(ledger, live, ref.id))
    if measured.restart_between:
        reference_from += " — measured on an earlier start of the unit: a restart pair for the judge's restart σ"
    return WatchReport(live, version, identity, True, verdict, result, reference, reference_from, "synthetic",
                       mode_reason, measured)


async def rebaseline(ledger: Ledger, site: Site, adapters: Adapters, live: Release) -> str:
    """Pin a new reference of the live release, measured now the way a watch would measure it: a passive
    window while it serves users, else a sweep at the watch's levels with the judge's full trial budget.
    Later watches compare with it; what it replaced stays in the ledger. Says what it pinned."""
    policy = site.policy
    if not await adapters.bench.healthy(site.url):
        raise EnvironmentUnfit(f"{site.name}: the live server does not answer /health: nothing to measure",
                               hint=f"`deployctl status {site.name}`; rebaseline once it serves again")
    report = await adapters.startup.live_report(site.unit)
    version = report.sglang_version if report else None
    key = dict(unit_hash=live.unit_hash, bench_key=bench_key(policy), host=site.host, sglang_version=version)
    scrapes, _ = await _window(site)
    if scrapes and not passive.idle(scrapes):
        result = passive.window_result(scrapes, policy.judge.max_trials, time.time())
        if not result.levels or sum(t.valid for t in result.levels[0].trials) < policy.judge.min_trials:
            raise EnvironmentUnfit(f"{site.name}: too little of the window was comparable (users queued, or "
                                   "nothing generated): no reference pinned", hint="run it again later")
        ledger.save_bench(live.id, PASSIVE_REFERENCE, result, **key)
        return (f"{site.name}: pinned a passive reference of release {live.id} at {result.levels[0].concurrency} "
                f"running requests (its /metrics over {policy.canary.passive_window_s:g} s, no request of ours)")
    start = await adapters.startup.live_start(site.unit)
    result = await adapters.bench.sweep(site.url, policy.canary.levels, policy.judge.max_trials)
    row = ledger.save_bench(live.id, REFERENCE, result, **key)
    ledger.record(live.id, "canary", "note", REFERENCE, {"bench_id": row, "start": vars(start) if start else None})
    levels = ", ".join(f"C={lv.concurrency}" for lv in result.levels)
    return f"{site.name}: pinned a synthetic reference of release {live.id} ({levels}; the server was idle)"


class Reference(NamedTuple):
    """A watch's reference: the measurement, where it came from in words, its row and when it was measured."""

    result: BenchResult | None
    said: str
    id: int | None = None
    at: float | None = None


def _reference(ledger: Ledger, site: Site, live: Release, version: str | None) -> Reference:
    """The release's own reference, fixed once chosen: the newest pinned one (``canary rebaseline``), else its
    measurement at promotion, else — pinned now, so no later promote attempt moves it — the newest stored
    baseline of its unit, else its first watch."""
    benches = ledger.benches(live.id)
    pinned = [b for b in benches if b.role == REFERENCE]
    if pinned:
        return Reference(pinned[-1].bench, f"its pinned reference (release {live.id})", pinned[-1].id, pinned[-1].at)
    kept = [b for b in benches if b.role == "candidate"]
    if kept:
        return Reference(kept[-1].bench, f"its promotion (release {live.id})", kept[-1].id, kept[-1].at)
    stored = ledger.fresh_baseline(unit_hash=live.unit_hash, bench_key=bench_key(site.policy), host=site.host,
                                   sglang_version=version, max_age_s=float("inf"))
    if stored is not None:
        said = f"the baseline measured for release {stored.release_id} (pinned as its reference)"
        row = ledger.save_bench(live.id, REFERENCE, stored.bench, unit_hash=live.unit_hash,
                                bench_key=bench_key(site.policy), host=site.host, sglang_version=version)
        return Reference(stored.bench, said, row, stored.at)  # measured then, whatever its copy's stamp
    watches = [b for b in benches if b.role == WATCH]
    if watches:
        return Reference(watches[0].bench, "its first watch", watches[0].id, watches[0].at)
    return Reference(None, "none yet (this is its first measurement)")


def _noted_start(ledger: Ledger, live: Release, row: int | None) -> ServerStart | None:
    """The start a measurement of ``live`` was taken on, where a canary note says: a watch's (its first watch
    as the reference) or a rebaseline's; a promotion's start is not noted (its time tells)."""
    if row is None:
        return None
    noted = next((e.detail["start"] for e in ledger.events(live.id)
                  if e.detail.get("bench_id") == row and e.detail.get("start")), None)
    return ServerStart(**noted) if noted else None


def _watches(ledger: Ledger, live: Release) -> list[BenchResult]:
    return [BenchResult.from_dict(b.result) for b in ledger.benches(live.id) if b.role == WATCH]


def _detail(verdict: WatchVerdict, reference_from: str) -> dict[str, Any]:
    return {
        "health": verdict.health.value, "healthy": True, "reference": reference_from,
        "outcome": verdict.verdict.outcome.value if verdict.verdict else None, "reasons": list(verdict.reasons),
        "change_points": [{"concurrency": s.concurrency, "index": s.point.index, "change_pct": s.point.change_pct,
                           "pvalue": s.point.pvalue} for s in verdict.shifts],
    }


def judged_promotes(ledger: Ledger, deployment: str) -> list[Judged]:
    """Finished promotes whose candidate was judged (or refused): what the canary never retries unchanged."""
    return [_judged(ledger, r) for r in ledger.history(deployment, limit=10_000)
            if r.kind == "promote" and r.finished and r.result in JUDGED_RESULTS]


def rollback_trials(ledger: Ledger, live: Release) -> list[Judged]:
    """The canary's finished trials of an earlier release on behalf of the degraded ``live`` release."""
    return [_judged(ledger, r) for r in ledger.history(live.deployment, limit=10_000)
            if r.kind == ROLLBACK_KIND and r.previous_id == live.id and r.finished]


def _judged(ledger: Ledger, release: Release) -> Judged:
    """The version identity a release was judged on: the canary's note when the canary started it, else its
    stored baseline's fingerprint (an operator's promote), else what its startup logs said."""
    noted = next((e.detail.get("sglang_version") for e in ledger.events(release.id) if e.name == TRIED), None)
    fingerprints = [b.fingerprint.sglang_version for b in ledger.benches(release.id)
                    if b.role == "baseline" and b.fingerprint is not None]
    logs = [version_key(None, StartupReport.from_dict(d)) for d in (release.baseline_startup, release.startup) if d]
    return Judged(release.id, release.unit_hash, version_identity(noted, *fingerprints, *logs), release.result or "")


@dataclass(frozen=True)
class CanaryTotals:
    """A deployment's counts from the ledger, for the metrics' counters."""

    degraded: int = 0  # degraded watches
    unclear: int = 0  # watches that could not decide
    rolled_back: int = 0  # candidates rolled back (rejected or inconclusive)
    restored: int = 0  # degraded releases the canary rolled back
    webhook_failures: int = 0  # webhook calls that failed


def ledger_totals(ledger: Ledger, deployment: str) -> CanaryTotals:
    releases = ledger.history(deployment, limit=10_000)
    events = [e for r in releases for e in ledger.events(r.id)]
    healths = [e.detail.get("health") for e in events if e.name == WATCH]
    return CanaryTotals(
        webhook_failures=sum(1 for e in events if e.name == WEBHOOK_FAILED),
        degraded=healths.count(Health.DEGRADED.value), unclear=healths.count(Health.UNCLEAR.value),
        rolled_back=sum(1 for r in releases if r.kind == "promote" and r.result in ("rejected", "inconclusive")),
        restored=sum(1 for r in releases if r.kind == ROLLBACK_KIND and r.result == "kept"))

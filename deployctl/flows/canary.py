"""The canary flow, in one place: under the lock, recover, watch the live release (``flows.canary_watch``),
then at most one change — roll back to an earlier release when the watch says degraded
(``deployctl.decisions.canary.decide_rollback``, tried by ``flows.canary_rollback``), or try the pending
candidate once (``decide_try``, through the promote flow) — and report it: journal, webhook, textfile metrics.
The ``canary`` verb parses, calls ``run_one`` per deployment and prints."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, TypeVar

from deployctl.adapters import journal_send, textfile
from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import DeploymentLock
from deployctl.console.release_verbs import adopt_installed, locked
from deployctl.decisions.canary import decide_rollback, decide_try
from deployctl.decisions.evidence import LevelRow, PromoteOutcome
from deployctl.decisions.report import table_lines
from deployctl.errors import Busy, DeployctlError, ExitCode, InputError, Interrupted, exit_code_of
from deployctl.flows.abort import abort_request
from deployctl.flows.canary_rollback import RollbackTry, concluded, try_earlier
from deployctl.flows.canary_watch import (
    TRIED,
    WEBHOOK_FAILED,
    CanaryTotals,
    WatchReport,
    judged_promotes,
    ledger_totals,
    rebaseline as pin_reference,
    rollback_trials,
    watch,
)
from deployctl.flows.promote import promote
from deployctl.flows.recover import recover_first
from deployctl.judge.watch import Health, level_means
from deployctl.live.protocols import Guard
from deployctl.operations.canary_units import arm_recheck
from deployctl.operations.site import Site


if TYPE_CHECKING:
    from deployctl.judge.verdict import LevelVerdict


NAME = "canary"
T = TypeVar("T")

# Most serious first: the code an --all run exits with.
SEVERITY = (ExitCode.ROLLBACK_FAILED, ExitCode.CANARY_DEGRADED, ExitCode.CANARY_ROLLED_BACK, ExitCode.BUG, ExitCode.BAD_INPUT,
            ExitCode.PREFLIGHT_REFUSED, ExitCode.REJECTED, ExitCode.INCONCLUSIVE, ExitCode.CANARY_UNCLEAR,
            ExitCode.INTERRUPTED, ExitCode.BUSY, ExitCode.CANARY_PROMOTED, ExitCode.OK)


VERDICT = {ExitCode.OK: "ok", ExitCode.CANARY_DEGRADED: "degraded", ExitCode.CANARY_PROMOTED: "promoted",
           ExitCode.REJECTED: "rejected", ExitCode.INCONCLUSIVE: "inconclusive", ExitCode.PREFLIGHT_REFUSED: "refused",
           ExitCode.ROLLBACK_FAILED: "rollback_failed", ExitCode.BUSY: "busy", ExitCode.CANARY_ROLLED_BACK: "rolled_back",
           ExitCode.CANARY_UNCLEAR: "unclear"}


QUIET = (ExitCode.OK, ExitCode.CANARY_PROMOTED)  # outcomes said on stdout and the journal at priority info


def most_serious(codes: list[int]) -> int:
    """The exit code of several outcomes (an unknown code counts as a bug's)."""
    return min(codes, key=lambda c: SEVERITY.index(c) if c in SEVERITY else SEVERITY.index(ExitCode.BUG))


@dataclass
class Run:
    """What one deployment's canary run did, for the exit code, the journal, the metrics and the webhook."""

    deployment: str
    code: int = ExitCode.OK
    lines: list[str] = field(default_factory=list)  # what happened (printed unless all is quiet)
    detail: list[str] = field(default_factory=list)  # for -v
    watch: WatchReport | None = None
    promote: PromoteOutcome | None = None
    error: DeployctlError | None = None  # what stopped it, when something did
    rollback: RollbackTry | None = None  # on_degraded: rollback, when it tried the release before

    @property
    def verdict(self) -> str:
        return VERDICT.get(self.code, "error")


def rebaseline_live(site: Site) -> str:
    """``canary rebaseline``: measure the live release now and pin it as the watch's reference."""
    # The real adapters here and in _canary (aiohttp, the judge: numpy, scipy) and the webhook in _webhook (httpx),
    # not at the top: `deployctl --help` and `canary install` would pay for them at start-up
    # (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters

    async def pin(lock: DeploymentLock) -> str:
        with Ledger.open(site.state_dir) as ledger:
            async with live_adapters(site, None) as adapters:
                await recover_first(ledger, site, adapters, NAME)
                live_id = adopt_installed(ledger, site)
                if live_id is None:
                    raise InputError(f"{site.unit} is not installed: there is no live release to rebaseline")
                return await _stoppable(pin_reference(ledger, site, adapters, ledger.get(live_id)), lock)

    with locked(site, NAME) as lock:
        return asyncio.run(pin(lock))


def run_one(site: Site, metrics_dir: Path | None, guard: Guard | None = None) -> Run:
    """One deployment's run; ``guard``: the dead-man's switch its promotes and rollbacks arm, as an operator's do."""
    out = Run(site.name)
    try:
        with locked(site, NAME) as lock:
            asyncio.run(_canary(site, lock, out, guard))
    except Busy as exc:
        out.code = ExitCode.BUSY
        out.lines.append(f"{site.name}: busy, nothing done: {exc.message}")
    except DeployctlError as exc:
        out.code = exit_code_of(exc)
        out.error = exc
        out.lines.append(f"{site.name}: error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
    _report(site, out, metrics_dir)
    return out


async def _canary(site: Site, lock: DeploymentLock, out: Run, guard: Guard | None) -> None:
    from deployctl.live.bindings import live_adapters
    from deployctl.live.output_gate import watch_checks

    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, None) as adapters:
            out.detail += await recover_first(ledger, site, adapters, NAME)  # exit 12 when it failed
            live_id = adopt_installed(ledger, site)
            if live_id is None:
                raise InputError(f"{site.unit} is not installed: there is no live release to watch",
                                 hint=f"install the baseline first: `deployctl restart {site.name} --profile baseline`")
            checks = watch_checks(ledger, site, adapters.outputs)
            report = await _stoppable(watch(ledger, site, adapters, ledger.get(live_id), checks), lock)
        out.watch = report
        _watch_lines(site, report, out)
        if report.health is Health.UNCLEAR:
            out.lines.append(await _recheck(site))
        canary = site.policy.canary
        candidate = site.plan(canary.profile).candidate_hash if canary.profile else None
        back = None
        if report.health is Health.DEGRADED:
            # A passive window is not comparable with a trial's sweep: only a synthetic watch is a rollback's baseline.
            back = decide_rollback(canary.on_degraded, report.release, report.result is not None and report.mode != "passive",
                                   {r.id: r for r in ledger.history(site.name, limit=10_000)},
                                   rollback_trials(ledger, report.release), report.version,
                                   window=canary.window, now=datetime.now())
        decision = decide_try(canary.profile, candidate, report.release.unit_hash, report.version,
                              judged_promotes(ledger, site.name), window=canary.window, now=datetime.now())
    if back is not None:
        (out.lines if canary.on_degraded == "rollback" else out.detail).append(
            f"  {'rollback' if back.attempt else 'no rollback'}: {back.reason}")
        if back.attempt:
            assert back.target is not None
            out.promote = await try_earlier(site, report, back.target, lock, guard)
            out.rollback, code, lines = concluded(site.name, report.release.id, back.target, out.promote)
            out.code = code or out.code
            out.lines += lines
            out.detail.append(f"{site.name}: the pending candidate waits for the next run (this one tried a rollback)")
            return
    out.detail.append(f"{site.name}: {decision.reason}")
    if not decision.attempt:
        return
    assert canary.profile is not None
    outcome = await promote(site, canary.profile, lock, guard=guard)
    with Ledger.open(site.state_dir) as ledger:  # the version it was tried on, for the next run's decision
        ledger.record(outcome.release_id, "canary", "note", TRIED, {"sglang_version": report.version})
    out.promote = outcome
    code = ExitCode.CANARY_PROMOTED if outcome.exit_code == ExitCode.OK else outcome.exit_code
    out.code = most_serious([out.code, code])
    out.lines.append(f"{site.name}: candidate {canary.profile}: {outcome.state.result.value if outcome.state.result else '?'}"
                     f" (release {outcome.release_id})")
    out.lines += [f"  {r}" for r in outcome.state.reasons]


async def _recheck(site: Site) -> str:
    """An unclear watch is looked at again sooner than the schedule would (never acted on)."""
    delay_s = site.policy.canary.unclear_recheck_s
    try:
        timer = await arm_recheck(site, delay_s)
    except DeployctlError as exc:
        return f"  not looking again sooner: {exc.message}"
    if timer is None:
        return "  the canary's timer is not installed here: run it again later to look again"
    return f"  looking again in {delay_s:g} s ({timer})"


async def _stoppable(work: Awaitable[T], lock: DeploymentLock) -> T:
    """``work`` (a watch: it changes nothing), stopped by SIGTERM/SIGINT — ``deployctl abort``,
    ``systemctl stop``, Ctrl-C — with exit 130 and the reason; the promote after it rolls back instead."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        reason = abort_request(lock) or "interrupted by a signal"
        raise Interrupted(f"{reason} during the watch; nothing was changed") from None
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


_WATCH_CODE = {Health.DEGRADED: ExitCode.CANARY_DEGRADED, Health.UNCLEAR: ExitCode.CANARY_UNCLEAR}


def _watch_lines(site: Site, report: WatchReport, out: Run) -> None:
    r = report.release
    head = f"{site.name}: live release {r.id} ({r.profile or '?'}): {report.health.value}"
    if report.health in _WATCH_CODE:
        out.code = _WATCH_CODE[report.health]
        out.lines.append(head)
        out.lines += [f"  {reason}" for reason in report.reasons]
    else:
        out.detail.append(head)
        out.detail += [f"  {reason}" for reason in report.reasons]
    if report.mode_reason:
        out.detail.append(f"  measured by {report.mode_reason}")
    out.detail.append(f"  compared with {report.reference_from}")
    if report.result is not None:
        rows = [f"  {line}" for line in table_lines(_rows(report))]
        (out.lines if report.health in _WATCH_CODE else out.detail).extend(rows)


def _rows(report: WatchReport) -> list[LevelRow]:
    """Reference against now, per level, as the promote's table shows baseline against candidate."""
    assert report.result is not None
    now = level_means(report.result, "output_tok_s")
    ref = level_means(report.reference, "output_tok_s") if report.reference else {}
    judged = {lv.concurrency: lv for lv in report.verdict.verdict.levels} if report.verdict and report.verdict.verdict else {}
    return [LevelRow(c, ref.get(c), v, _change_pct(judged.get(c)), judged[c].state if c in judged else None)
            for c, v in sorted(now.items())]


def _change_pct(level: LevelVerdict | None) -> float | None:
    intervals = [c.interval for c in level.checks if c.interval is not None] if level else []
    return 100.0 * intervals[0].change if intervals else None


def live_after(out: Run) -> tuple[int | None, str | None]:
    """The live release (id, unit hash) once the run is over: the promoted candidate or the restored earlier
    release when the run changed it, else the one it watched."""
    if out.code in (ExitCode.CANARY_PROMOTED, ExitCode.CANARY_ROLLED_BACK) and out.promote is not None:
        return out.promote.release_id, out.promote.plan.candidate_hash
    release = out.watch.release if out.watch else None
    return (release.id, release.unit_hash) if release else (None, None)


def _report(site: Site, out: Run, metrics_dir: Path | None) -> None:
    """Webhook, journal, metrics: each best-effort after the run, never changing its outcome. A failed
    webhook is said in the run's lines, recorded in the ledger (the textfile counts those) and the journal."""
    watched = out.watch.release if out.watch else None
    live, _ = live_after(out)
    failed = _webhook(site, out, live)
    if failed is not None and live is not None:
        try:
            with Ledger.open(site.state_dir) as ledger:
                ledger.record(live, "canary", "note", WEBHOOK_FAILED, {"verdict": out.verdict, "problem": failed})
        except DeployctlError as exc:
            out.lines.append(f"{site.name}: the failed webhook is not in the ledger either: {exc.message}")
    summary = "; ".join(line.strip() for line in out.lines[:4]) or f"{site.name}: {out.verdict}"
    journal_send.send(summary, priority="info" if out.code in QUIET and failed is None else "warning",
                      fields={"DEPLOYCTL_DEPLOYMENT": site.name, "DEPLOYCTL_VERDICT": out.verdict,
                              "DEPLOYCTL_RELEASE": str(live) if live is not None else "",
                              "DEPLOYCTL_WATCHED_RELEASE": str(watched.id) if watched else "",
                              "DEPLOYCTL_EXIT_CODE": str(out.code),
                              **({"DEPLOYCTL_WEBHOOK_FAILED": failed} if failed else {}),
                              **(out.rollback.journal_fields() if out.rollback else {})})
    if metrics_dir is not None:
        try:
            textfile.write(metrics_dir, _metrics(site, out))
        except DeployctlError as exc:
            out.lines.append(f"{site.name}: {exc.message}")


def _webhook(site: Site, out: Run, live: int | None) -> str | None:
    """Call the policy's webhook on anything but ok and busy; why it failed, or None (sent, or none to send)."""
    hook = site.policy.canary.webhook
    if hook is None or out.code in (ExitCode.OK, ExitCode.BUSY):
        return None
    from deployctl.adapters import webhook

    watched = out.watch.release if out.watch else None
    payload = {"text": f"deployctl canary on {site.host}: " + "\n".join(out.lines), "deployment": site.name,
               "verdict": out.verdict, "exit_code": out.code, "release": live,
               "watched_release": watched.id if watched else None,
               "host": site.host, "lines": out.lines, "rollback": asdict(out.rollback) if out.rollback else None,
               "levels": [asdict(row) for row in _rows(out.watch)] if out.watch and out.watch.result else []}
    try:
        secret = webhook.read_secret(hook.secret_file)
    except OSError as exc:
        problem = f"webhook not sent: cannot read its secret file: {exc.strerror}"
    else:
        problem = webhook.post(hook.url, payload, secret=secret, attempts=hook.attempts, timeout_s=hook.timeout_s)
    if problem:
        out.lines.append(f"{site.name}: {problem}")
    return problem


def _metrics(site: Site, out: Run) -> textfile.CanaryMetrics:
    w = out.watch
    tok, change = {}, {}
    if w is not None and w.result is not None:
        tok = level_means(w.result, "output_tok_s")
    if w is not None and w.verdict is not None and w.verdict.verdict is not None:
        change = {lv.concurrency: pct for lv in w.verdict.verdict.levels if (pct := _change_pct(lv)) is not None}
    totals = CanaryTotals()
    try:
        with Ledger.open(site.state_dir) as ledger:
            totals = ledger_totals(ledger, site.name)
    except DeployctlError:
        pass  # the run's own outcome is already recorded; the counters wait for the next run
    live, unit_hash = live_after(out)
    return textfile.CanaryMetrics(
        deployment=site.name, outcome=out.verdict, finished_at=time.time(), live_release=live,
        live_unit_hash=unit_hash,
        tok_s=tok, change_pct=change,
        degradations=totals.degraded, unclear=totals.unclear, rollbacks=totals.rolled_back,
        degraded_rollbacks=totals.restored, webhook_failures=totals.webhook_failures)

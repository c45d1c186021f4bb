"""A benchmark sweep with the server's telemetry: the one the ``bench`` verb runs and the one a promote runs.

``measure`` samples the GPUs (NVML, or the simulator's endpoint) and the server's process tree while
``run_sweep`` drives the load, attaches a summary to each trial and keeps the raw samples with the result
(``BenchResult.telemetry_samples``). ``LiveBench`` binds it to the runner's ``Bench`` protocol for one
deployment: the unit's MainPID for the process tree, its journal for retractions.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from deployctl.adapters.journal import Journal
from deployctl.adapters.systemd import Systemd
from deployctl.bench.result import BenchResult, merge_results
from deployctl.bench.telemetry import render_telemetry, samples_to_dicts
from deployctl.errors import DeployctlError
from deployctl.inventory.policy import BenchPolicy
from deployctl.operations.restart import http_health_probe
from deployctl.operations.site import Site

if TYPE_CHECKING:
    from deployctl.load.sweep import Progress

log = logging.getLogger("deployctl")


async def measure(
    url: str,
    policy: BenchPolicy,
    *,
    simulated: bool,
    say: Callable[[str], None],
    levels: Sequence[int] | None = None,
    trials: Mapping[int, int] | int = 1,
    pid: int | None = None,
    **sweep: Any,
) -> BenchResult:
    """Sweep ``levels`` (``trials`` each, or per level) with telemetry; ``sweep`` goes to ``run_sweep``.

    ``say`` hears once why GPU telemetry is unavailable (no NVML: a fact, not an error)."""
    # Imported here: the load client, NVML and psutil cost every other verb (status, history) their start-up.
    from deployctl.load.sweep import run_sweep
    from deployctl.load.telemetry import TelemetrySampler

    sampler = TelemetrySampler.for_server(url, simulated=simulated, pid=pid)
    if sampler.unavailable:
        say(f"GPU telemetry unavailable: {sampler.unavailable}")
    result: BenchResult | None = None
    sampler.start()
    try:
        for cs, n in _parts(levels, trials):
            part = await run_sweep(url, policy, levels=cs, trials=n, telemetry=sampler.window, **sweep)
            result = part if result is None else merge_results(result, part)
    finally:
        samples = await asyncio.to_thread(sampler.stop)  # joins the sampling thread
    assert result is not None
    return replace(result, telemetry_samples=tuple(samples_to_dicts(samples)))


def _parts(levels: Sequence[int] | None, trials: Mapping[int, int] | int) -> list[tuple[Sequence[int] | None, int]]:
    """One sweep per distinct trial count: ``{64: 2, 8: 2, 1: 1}`` → ``[([1], 1), ([64, 8], 2)]``."""
    if isinstance(trials, int):
        return [(levels, trials)]
    by_count: dict[int, list[int]] = {}
    for c, n in trials.items():
        by_count.setdefault(n, []).append(c)
    return [(cs, n) for n, cs in sorted(by_count.items())]


class LiveBench:
    """The runner's ``Bench`` for one deployment: ``measure`` with the unit's process tree and its journal
    read for retractions; the raw samples travel with the result into the ledger."""

    def __init__(self, site: Site, systemd: Systemd | None = None, note: Callable[[str], None] | None = None,
                 on_progress: Callable[[], None] | None = None) -> None:
        self.site = site
        self.on_progress = on_progress  # each finished request: the dead-man's lease is renewed
        self.policy = site.policy
        self.systemd = systemd
        self.journal: Journal = site.endpoint.journal()
        self.note = note
        self._said: set[str] = set()
        self._planned: Mapping[int, int] | int = 1  # the trials the sweep under way runs a level: "trial 2 of 3"

    def _progress(self, p: Progress) -> None:
        """One line per finished trial, so a long sweep shows it is moving."""
        if self.on_progress is not None:
            self.on_progress()
        if self.note is not None and p.result is not None:
            t = p.result
            invalid = f", not judged: {t.invalid_reason}" if t.invalid_reason else ""
            power = render_telemetry(t.telemetry)
            planned = self._planned if isinstance(self._planned, int) else self._planned.get(t.concurrency, t.trial + 1)
            self.note(f"C={t.concurrency} trial {t.trial + 1} of {planned}: {t.output_tok_s:.1f} tok/s, "
                      f"{t.requests_ok} ok, {t.requests_failed} failed{invalid}" + (f"; {power}" if power else ""))
            for n in t.notes:
                self.note(f"  note: {n}")

    def _say_once(self, text: str, *, about: str | None = None) -> None:
        """Say ``text`` unless something was said ``about`` the same thing already (default: the text)."""
        key = about or text
        if key in self._said:
            return
        self._said.add(key)
        if self.note is not None:
            self.note(text)
        else:
            log.info("%s", text)

    async def healthy(self, url: str, *, within_s: float = 5.0) -> bool:
        probe = http_health_probe(url + "/health")
        deadline = asyncio.get_running_loop().time() + within_s
        while not await probe():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def sweep(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int) -> BenchResult:
        main_pid, invocation_id = await self._unit()
        self._planned = trials
        return await measure(url, self.policy.bench, simulated=self.site.simulated, say=self._say_once,
                             levels=levels, trials=trials, pid=main_pid, progress=self._progress,
                             api_key=self.site.api_key(),
                             server_log=self._server_log(invocation_id) if invocation_id else None)

    async def _unit(self) -> tuple[int | None, str | None]:
        """The unit's MainPID (its process tree is sampled) and invocation (whose journal is read)."""
        if self.systemd is None:
            return None, None
        state = await self.systemd.unit_state(self.site.unit)
        return state.main_pid or None, state.invocation_id or None

    def _server_log(self, invocation_id: str) -> Callable[[float, float], Any]:
        async def lines(start: float, end: float) -> list[str] | None:
            """The server's own lines stamped in [start, end]; None (not judged on) when unreadable."""
            try:
                entries = await self.journal.read(invocation_id, since=start, until=end)
            except (DeployctlError, OSError) as exc:
                self._say_once(f"cannot read the server's journal, so retractions are not checked: {exc}",
                               about=f"journal {invocation_id}")
                return None
            return [e.text for e in entries if not e.from_manager and start <= e.ts <= end]

        return lines

    def merge(self, a: BenchResult, b: BenchResult) -> BenchResult:
        return merge_results(a, b)

"""``deployctl bench``: run the fixed-shape concurrency sweep against a deployment or a URL."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TextIO

from deployctl.bench.result import BenchResult
from deployctl.bench.table import render_table
from deployctl.console.inventory_args import deployment_name, load_inventory_from_args
from deployctl.console.options import add_deployment
from deployctl.errors import ExitCode, InputError
from deployctl.inventory.policy import BenchPolicy
from deployctl.load.measure import measure


if TYPE_CHECKING:  # the sweep brings httpx: `deployctl --help` loads this module and never measures
    from deployctl.load.sweep import Progress

NAME = "bench"
HELP = "benchmark a server: streaming requests at fixed concurrency levels, the operators' table + JSON"
DESCRIPTION = """\
Send fixed-shape streaming completions (random token-id prompts, unique per request so prefix caching
cannot help; max_tokens with ignore_eos) at each concurrency level, after discarded warm-up requests,
and print the operators' table: C | Agg tok/s | Per-req tok/s | Tokens | Wall(s) | Ok, with TTFT and
ITL percentiles. A trial the judge must not use (too many failures, concurrency never reached on the
server, the load client itself saturated, Ctrl-C) is marked invalid with the reason.

Defaults come from the deployment's policy (bench: concurrency, input/output tokens, requests per level
= max(4, 2 x C), warm-up). The JSON (--json on stdout, -o FILE to a file) is the judge's input; its format is in docs/bench.md.
Ctrl-C stops the sweep, and what was measured is still printed and written.

examples:
  deployctl bench -d qwen35 -o /tmp/baseline.json
  deployctl bench qwen35 -o /tmp/baseline.json          # the positional alias of -d qwen35
  deployctl bench --url http://127.0.0.1:30000 --concurrency 1,4,16 --input-tokens 1000 --output-tokens 1000
  deployctl bench -d glm5 --concurrency 64 --trials 3 --json      # JSON on stdout, table on stderr
  deployctl bench glm5 --trials 3 --html sweep.html --format markdown
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment(parser, help="deployment from the inventory (its host and port give the URL; optional when "
                                "the inventory has only one)")
    parser.add_argument("--url", help="server base URL instead of a deployment, e.g. http://127.0.0.1:30000")
    parser.add_argument("--concurrency", "-c", type=_int_list, metavar="C,C,…", help="levels (default: policy)")
    parser.add_argument("--input-tokens", type=_positive, metavar="N", help="prompt length in tokens")
    parser.add_argument("--output-tokens", type=_positive, metavar="N", help="generated tokens per request")
    parser.add_argument("--requests", type=_positive, metavar="N", help="requests per level (default max(4, 2×C))")
    parser.add_argument("--duration", type=float, metavar="S", help="run each level for S seconds instead")
    parser.add_argument("--warmup", type=int, metavar="N", help="discarded warm-up requests before the sweep")
    parser.add_argument("--trials", type=_positive, default=1, metavar="K", help="trials per level (default 1)")
    parser.add_argument("--request-rate", type=float, metavar="R",
                        help="open loop: Poisson arrivals at R req/s, at most C in flight")
    parser.add_argument("--text-prompt", metavar="TEXT", help="send this text as every prompt instead")
    parser.add_argument("--vocab-size", type=_positive, metavar="V",
                        help="token ids are drawn below this (default: what the server reports, else 32000)")
    parser.add_argument("--seed", type=int, help="prompt seed (default: random)")
    parser.add_argument("-o", "--output", metavar="FILE", help="also write the result as JSON to FILE")
    parser.add_argument("--html", metavar="FILE", help="also write the sweep's charts as one self-contained HTML file")
    parser.add_argument("--format", choices=("text", "markdown"), default="text",
                        help="markdown: print the table as GitHub-flavoured markdown")


def run(args: argparse.Namespace) -> int:
    target = _resolve(args)
    policy = _policy(target.policy, args)
    out = sys.stderr if args.json else sys.stdout
    result, stopped = asyncio.run(_measure(target, policy, args, out))
    if args.format == "markdown":
        from deployctl.reporting.markdown import sweep_markdown

        print(sweep_markdown(result), file=out)
    else:
        print(render_table(result), file=out)
    _print_extras(result, out)
    text = json.dumps(result.to_dict(), indent=1)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n")
        except OSError as exc:
            raise InputError(f"cannot write {args.output}: {exc.strerror}") from exc
        print(f"wrote {args.output}", file=out)
    if args.html:
        _write_html(result, target, args.html, out)
    if args.json:
        print(text)
    return ExitCode.INTERRUPTED if stopped else ExitCode.OK


def _write_html(result: BenchResult, target: "_Target", path: str, out: TextIO) -> None:
    from deployctl.reporting.page import bench_page
    from deployctl.reporting.story import bench_story

    html = bench_page(bench_story(result), f"Benchmark of {target.url}")
    try:
        Path(path).write_text(html, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", hint="choose another path with --html FILE") from None
    print(f"wrote {path}", file=out)


@dataclass(frozen=True)
class _Target:
    url: str
    policy: BenchPolicy
    model: str | None = None
    simulated: bool | None = None  # None: unknown (a bare URL)


def _resolve(args: argparse.Namespace) -> _Target:
    if args.url:
        if args.deployment:
            raise InputError("give either a deployment or --url, not both")
        return _Target(args.url.rstrip("/"), BenchPolicy())
    from deployctl.inventory.model import deployment_policy
    from deployctl.operations.site import server_url

    inv = load_inventory_from_args(args)
    dep = inv.deployment(deployment_name(inv, args))
    host = inv.host_of(dep)
    preset = inv.models.get(dep.model)
    model = (preset.served_name or preset.path) if preset else None
    return _Target(server_url(host, dep.port), deployment_policy(inv, dep).bench, model, host.simulated)


def _policy(base: BenchPolicy, args: argparse.Namespace) -> BenchPolicy:
    update = {
        "concurrency": args.concurrency,
        "input_tokens": args.input_tokens,
        "output_tokens": args.output_tokens,
        "requests_per_level": args.requests,
        "warmup_requests": args.warmup,
    }
    try:
        return BenchPolicy(**{**base.model_dump(), **{k: v for k, v in update.items() if v is not None}})
    except ValueError as exc:
        raise InputError(f"bad benchmark settings: {exc}") from None


async def _measure(
    target: _Target, policy: BenchPolicy, args: argparse.Namespace, out: TextIO
) -> tuple[BenchResult, bool]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        print("\nstopping: finishing what was measured (Ctrl-C again to abort)", file=sys.stderr)
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C raises KeyboardInterrupt

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        with _ProgressDisplay(out) as progress:
            result = await measure(
                target.url, policy, simulated=await _simulated(target), say=lambda text: print(text, file=out),
                levels=policy.concurrency, trials=args.trials, progress=progress, model=target.model,
                vocab_size=args.vocab_size, text_prompt=args.text_prompt, duration_s=args.duration,
                request_rate=args.request_rate, seed=args.seed, stop=stop,
            )
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    return result, stop.is_set()


async def _simulated(target: _Target) -> bool:
    """Whether the server is the simulator (its telemetry then comes from its own endpoint)."""
    if target.simulated is not None:
        return target.simulated
    from deployctl.adapters.http_control import ControlClient, ServerUnreachable

    async with ControlClient(target.url) as control:
        try:
            return await control.is_simulator()
        except ServerUnreachable:
            return False  # run_sweep reports the unreachable server with the right endpoint


def _print_extras(result: BenchResult, out: TextIO) -> None:
    from deployctl.bench.telemetry import render_telemetry

    for level in result.levels:
        for t in level.trials:
            line = render_telemetry(t.telemetry)
            client = t.client
            cpu, lag = client.get("client_cpu_pct"), client.get("loop_lag_p99_s")
            self_check = (f"client CPU {cpu:.0f} %, loop lag p99 {1000 * lag:.1f} ms"
                          if cpu is not None and lag is not None else "")
            source = client.get("token_count_source")
            tokens = "" if source in (None, "usage") else f"tokens counted from {source} (no server usage)"
            parts = [p for p in (line, self_check, tokens) if p]
            if parts:
                print(f"C={t.concurrency} trial {t.trial}: " + "; ".join(parts), file=out)


class _ProgressDisplay:
    """A rich progress bar on a terminal; one plain line per trial otherwise (cron, ssh without -t)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._tty = out.isatty()

    def __enter__(self) -> Callable[[Progress], None]:
        if not self._tty:
            return self._plain
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bar

        self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), console=Console(file=self._out), transient=True)
        self._bar.__enter__()
        self._tasks: dict = {}
        return self._rich

    def __exit__(self, *exc: object) -> None:
        if self._tty:
            self._bar.__exit__(*exc)

    def _plain(self, p: Progress) -> None:
        if p.trial is None and p.done == p.total:
            print(f"warm-up: {p.done} requests done", file=self._out, flush=True)
        elif p.result is not None:
            print(_trial_line(p), file=self._out, flush=True)

    def _rich(self, p: Progress) -> None:
        key = (p.concurrency, p.trial)
        if key not in self._tasks:
            label = "warm-up" if p.trial is None else f"C={p.concurrency} trial {p.trial}"
            self._tasks[key] = self._bar.add_task(label, total=p.total, info="")
        info = f"{p.ok} ok" + (f", {p.failed} failed" if p.failed else "") + f", {p.output_tokens} tokens"
        self._bar.update(self._tasks[key], completed=p.done, info=info)
        if p.result is not None:
            self._bar.console.print(_trial_line(p))


def _trial_line(p: Progress) -> str:
    t = p.result
    state = "" if t.valid else f"  INVALID: {t.invalid_reason}"
    return (f"C={t.concurrency} trial {t.trial}: {t.requests_ok} ok, {t.requests_failed} failed, "
            f"{t.output_tokens} tokens, {t.output_tok_s:.1f} tok/s, {t.wall_s:.1f} s{state}")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"concurrency levels must be positive integers, got {text!r}")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value

"""deployctl startup-report: what SGLang decided at startup (or why it failed), from a log or the journal."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.options import FILES_IN_THE_WAY, add_deployment
from deployctl.console.startup_log import load_report
from deployctl.errors import ExitCode, InputError
from deployctl.facts.secrets import redact
from deployctl.startup.parser import StartupParser, StartupReport
from deployctl.startup.text import render_report


NAME = "startup-report"
HELP = "what SGLang decided at startup (capacity, CUDA graphs, untuned kernels) or why it failed"
DESCRIPTION = """\
Read an SGLang startup log (0.3 … 0.5.23; a file, stdin, or the current invocation of a
deployment's unit in the journal) and print the facts: outcome (ready / failed / starting) and the
phase reached with the time each took; a failure's kind, message, failed ranks and evidence lines
(Python exceptions, CUDA/NCCL errors printed by kernels, graph-capture failures, dead processes);
the split (TP/DP/EP/PP), weight quantisation and speculative decoding (draft model); the effective
max_running_requests (TP0's scheduler line) next to the configured one; KV tokens, context length,
free memory; CUDA-graph and piecewise-graph state; untuned MoE kernel configs; deprecated flags;
the SGLang version (one release, a range, or unknown, with the cues). A tail-only paste or a log
cut short is read too; a file that is not an SGLang log is refused (exit 2). The log may hold \\r
progress meters, ANSI colours, millisecond timestamps, and the prefixes of docker compose
(`svc  | `), kubectl --timestamps/--prefix, journald or a `> ` quote. JSON keys are stable
(docs/startup.md). Exit 0 when the log is ready or still starting, 6 when it failed (the
report is printed either way), so `deployctl startup-report log && …` stops on a failed start.

examples:
  deployctl startup-report /var/log/sglang/start.log
  journalctl -u sglang-qwen35.service -o cat -a | deployctl startup-report -
  docker compose logs sglang | deployctl startup-report -
  deployctl startup-report --deployment qwen35 -i inventory/example.yaml
  deployctl startup-report start.log --json | jq .max_running_requests
  deployctl startup-report start.log --server-info server_info.json   # version from GET /server_info
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="the log ('-' for stdin)")
    add_deployment(parser, alias=False,
                   help="read the current invocation of DEPLOYMENT's unit from the journal instead of FILE"
                        + FILES_IN_THE_WAY)
    parser.add_argument("--server-info", metavar="FILE", help="JSON saved from GET /server_info (authoritative version)")


def _server_info(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected the JSON object GET /server_info returns")
    return data


async def _from_journal(args: argparse.Namespace, server_info: dict[str, Any] | None) -> StartupReport:
    from deployctl.adapters.http_control import ControlClient, ServerUnreachable
    from deployctl.operations.restart import Endpoint, read_startup
    from deployctl.operations.site import server_url

    inv = load_inventory_from_args(args)
    dep = inv.deployment(args.deployment)
    endpoint = Endpoint.from_env()
    systemd = await endpoint.connect()
    try:
        state = await systemd.unit_state(dep.unit)
    finally:
        await systemd.close()
    if not state.invocation_id:
        raise InputError(f"{dep.unit} has no current invocation (it has not been started since boot)",
                         hint=f"`systemctl status {dep.unit}`; or give a saved log FILE")
    lines = await read_startup(endpoint.journal(), state.invocation_id)
    if server_info is None and state.active_state == "active":
        try:
            async with ControlClient(server_url(inv.host_of(dep), dep.port), timeout_s=3.0) as client:
                server_info = await client.server_info()
        except ServerUnreachable:
            server_info = None
    parser = StartupParser(server_info=server_info)
    for line in lines:
        if not line.from_manager:
            parser.feed(line.text)
    return parser.report()


def run(args: argparse.Namespace) -> int:
    info = _server_info(args.server_info)
    if args.deployment:
        if args.file:
            raise InputError("give either FILE or --deployment, not both")
        report = asyncio.run(_from_journal(args, info))
    elif args.file:
        report = load_report(args.file, server_info=info)
    else:
        raise InputError("no log given", hint="deployctl startup-report FILE | - | --deployment D")
    if args.json:
        print(json.dumps(redact(report.to_dict()), indent=2))
    else:
        print(render_report(report, verbose=getattr(args, "verbose", 0) > 0))
    return ExitCode.FAILED if report.outcome == "failed" else ExitCode.OK

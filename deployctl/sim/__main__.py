"""`python -m deployctl.sim <sglang.launch_server flags>`: play the startup log, then serve."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sys
import time
from typing import Mapping

from aiohttp import web

from deployctl.sim import answers, cli, startup
from deployctl.sim.batchlog import BatchLog
from deployctl.sim.engine import Engine
from deployctl.sim.faults import parse_faults
from deployctl.sim.resolve import Resolved, resolve
from deployctl.sim.server import ServerState, access_logger, build_app
from deployctl.sim.throughput import build as build_perf, parse_swing
from deployctl.sim.world import host_from_env, world


class _Log:
    """SGLang's log prefix: '[%Y-%m-%d %H:%M:%S{.ms}{ TPn}] ', local time, stderr, flushed."""

    def __init__(self, env: Mapping[str, str], resolved: Resolved) -> None:
        self.ms = env.get("SGLANG_LOG_MS", "0").lower() in ("1", "true")
        self.resolved = resolved

    def prefix(self, rank: int) -> str:
        now = time.time()
        ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        if self.ms:
            ts += f".{int(now * 1000) % 1000:03d}"
        return f"[{ts}{startup.rank_tag(self.resolved, rank)}] "

    def line(self, rank: int, text: str, stdout: bool = False) -> None:
        stream = sys.stdout if stdout else sys.stderr
        stream.write(("" if rank == startup.BARE else self.prefix(rank)) + text + "\n")
        stream.flush()

    def raw(self, text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()


def _die(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        os.kill(os.getpid(), -code)
    os._exit(code)


async def _serve(argv: list[str], env: Mapping[str, str]) -> None:
    try:
        version = cli.canonical_version(env.get("SGLANG_SIM_VERSION") or world()["default_version"])
    except ValueError as exc:
        print(exc, file=sys.stderr)
        _die(2)
    parsed = cli.parse(version, argv)
    try:
        faults = parse_faults(env.get("SGLANG_SIM_FAULT"))
        parse_swing(env.get("SGLANG_SIM_SWING"))  # refused before startup, as a bad fault spec is
    except ValueError as exc:  # FaultSpecError included
        print(exc, file=sys.stderr)
        _die(2)
    host = host_from_env(env)
    resolved = resolve(version, parsed, host, env)
    log = _Log(env, resolved)
    speed = float(env.get("SGLANG_SIM_SPEED", "1") or 1) * faults.slow_start
    time_scale = float(env.get("SGLANG_SIM_TIME_SCALE", "1") or 1)
    bind_host = str(resolved.server_args.get("host") or "127.0.0.1")
    port = int(resolved.server_args.get("port") or 30000)

    runner: web.AppRunner | None = None
    state: ServerState | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    for event in startup.script(resolved, faults.start, os.getpid(), bind_host, port):
        if stop.is_set():
            break
        if isinstance(event, startup.Phase):
            if faults.hang_phase == event.name:
                await stop.wait()
                break
        elif isinstance(event, startup.Pause):
            # interruptible, so `systemctl stop` during a slow (SGLANG_SIM_SPEED=60) start is prompt
            try:
                await asyncio.wait_for(stop.wait(), event.seconds * speed)
            except asyncio.TimeoutError:
                pass
        elif isinstance(event, startup.Line):
            log.line(event.rank, event.text, event.stdout)
        elif isinstance(event, startup.Raw):
            log.raw(event.text)
        elif isinstance(event, startup.Listen):
            assert resolved.model is not None
            perf = build_perf(resolved.model, env, host.gpu.idle_w, host.gpu.power_limit_w, resolved.cuda_graph,
                              resolved.speculative, resolved.server_args, host.gpu.compute_capability,
                              host.p2p, resolved.tp)
            engine = Engine(perf, resolved.effective_mrr, int(resolved.server_args.get("chunked_prefill_size") or 8192),
                            time_scale, seed=env.get("SGLANG_SIM_SEED"),
                            kv_tokens=resolved.memory.kv_tokens if resolved.memory else 1 << 62,
                            log=BatchLog(resolved, log.line), stall_rate=faults.batch_stall,
                            stall_s=faults.batch_stall_s)
            engine.start()
            state = ServerState(resolved=resolved, host=host, engine=engine, faults=faults,
                                log=lambda text: log.line(startup.MAIN, text),
                                emit_ts=env.get("SGLANG_SIM_EMIT_TS") == "1",
                                outputs=answers.corruption(world(), env, resolved.server_args,
                                                           host.gpu.compute_capability, faults.outputs))
            runner = web.AppRunner(build_app(state), access_log_class=access_logger(), handle_signals=False,
                                   shutdown_timeout=1.0)
            await runner.setup()
            try:
                await web.TCPSite(runner, bind_host, port, reuse_address=True).start()
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    log.line(startup.MAIN, f"ERROR:    [Errno 98] error while attempting to bind on address ('{bind_host}', {port}): address already in use")
                else:
                    log.line(startup.MAIN, f"ERROR:    [Errno {exc.errno}] {exc.strerror}")
                _die(1)
        elif isinstance(event, startup.Ready):
            assert state is not None
            state.ready = True
        elif isinstance(event, startup.Exit):
            _die(event.code)
    await stop.wait()
    if runner is not None:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    asyncio.run(_serve(sys.argv[1:] if argv is None else argv, os.environ))
    return 0


if __name__ == "__main__":
    sys.exit(main())

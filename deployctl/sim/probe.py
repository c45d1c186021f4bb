"""A tiny aiohttp load client for checking the simulator itself (tests, benchmarks/sim_throughput.py).

Not the product's benchmark (that is deployctl's load engine); this only needs to be cheap and exact.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    requests: int
    output_tokens: int
    wall_s: float
    chunks: int
    simulated_s: float = 0.0    # the engine's own clock over the level (model seconds, not time-scaled)
    engine_tokens: int = 0      # tokens the engine generated over the level

    @property
    def agg_tok_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def model_tok_s(self) -> float:
        """Aggregate tok/s on the simulator's virtual clock: the model's throughput, unscaled, which a
        loaded host cannot bend (it only makes the wall clock, ``agg_tok_s``, slower)."""
        return self.engine_tokens / self.simulated_s if self.simulated_s > 0 else 0.0


async def run_level(base_url: str, concurrency: int, requests: int, input_tokens: int = 1000,
                    output_tokens: int = 1000, stream: bool = True) -> LevelResult:
    """Send `requests` completions, `concurrency` at a time; count tokens from the usage chunk."""
    body = {"prompt": [1] * input_tokens, "max_tokens": output_tokens, "ignore_eos": True, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    payload = json.dumps(body)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    totals = {"tokens": 0, "chunks": 0}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            queue.get_nowait()
            async with session.post(f"{base_url}/v1/completions", data=payload,
                                    headers={"Content-Type": "application/json"}) as resp:
                resp.raise_for_status()
                if not stream:
                    totals["tokens"] += (await resp.json())["usage"]["completion_tokens"]
                    continue
                async for raw in resp.content:
                    if not raw.startswith(b"data: {"):
                        continue
                    totals["chunks"] += 1
                    if b'"choices":[]' in raw:
                        totals["tokens"] += json.loads(raw[6:])["usage"]["completion_tokens"]

    async def clock(session: aiohttp.ClientSession) -> tuple[float, int]:
        async with session.get(f"{base_url}/sim/telemetry") as resp:
            engine = (await resp.json())["engine"]
        return engine["simulated_s"], engine["generation_tokens"]

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        sim_start, tokens_start = await clock(session)
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        wall = time.perf_counter() - start
        sim_end, tokens_end = await clock(session)
    return LevelResult(concurrency, requests, totals["tokens"], wall, totals["chunks"],
                       sim_end - sim_start, tokens_end - tokens_start)


@dataclass
class SimHandle:
    """A simulator child process started by `launch`; `log()` returns what it wrote to stderr."""

    proc: "subprocess.Popen[bytes]"
    port: int
    stderr_path: str
    stdout_path: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def access_log(self) -> str:
        with open(self.stdout_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range. ``bind(0)`` would pick one inside that range,
    where any outgoing connection on a busy host (a load client's source port) may take it before the
    server binds it, and the server then fails with "address already in use" once in a while."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    pick = random.SystemRandom()
    for _ in range(100):
        port = pick.randrange(max(1024, low - 16384), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(flags: list[str], env: dict[str, str], workdir: str, port: int | None = None) -> SimHandle:
    """Start `python -m deployctl.sim FLAGS --host 127.0.0.1 --port P` with `env` over os.environ."""
    port = port or free_port()
    stderr_path = os.path.join(workdir, f"sim-{port}.err")
    stdout_path = os.path.join(workdir, f"sim-{port}.out")
    with open(stderr_path, "wb") as err, open(stdout_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "deployctl.sim", *flags, "--host", "127.0.0.1", "--port", str(port)],
                                env={**os.environ, **env}, stdout=out, stderr=err)
    return SimHandle(proc, port, stderr_path, stdout_path)


def wait_ready(sim: SimHandle, timeout_s: float = 30.0) -> bool:
    """Poll /health until 200; False if the process exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sim.proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{sim.url}/health", timeout=1) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.05)
    return False

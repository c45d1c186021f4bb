"""A tiny aiohttp load client for checking the simulator itself (tests, benchmarks/sim_throughput.py).

Not the product's benchmark (that is deployctl's load engine); this only needs to be cheap and exact.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    requests: int
    output_tokens: int
    wall_s: float
    chunks: int

    @property
    def agg_tok_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0


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

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        wall = time.perf_counter() - start
    return LevelResult(concurrency, requests, totals["tokens"], wall, totals["chunks"])

"""The passive watch's window: scrapes of the live server's /metrics, evenly spaced over the policy's window.

No request of ours reaches the model: only GET /metrics, as Prometheus itself would.
"""

from __future__ import annotations

import asyncio
import time

from deployctl.adapters import server_metrics
from deployctl.inventory.policy import PrometheusSource
from deployctl.judge.passive import Scrape, parse_scrape, scrape_from_vector

SCRAPES_PER_TRIAL = 4  # gauge samples per sub-window: its mean occupancy is their mean


async def scrape_once(url: str, api_key: str | None) -> Scrape | None:
    """One scrape, or None when the server exports no /metrics."""
    async with server_metrics.client(api_key) as http:
        text = await server_metrics.fetch(http, url)
    return parse_scrape(text, time.monotonic()) if text is not None else None


async def scrape_window(url: str, api_key: str | None, window_s: float, trials: int) -> list[Scrape]:
    """``trials * SCRAPES_PER_TRIAL + 1`` scrapes over ``window_s`` (the first at once)."""
    count = trials * SCRAPES_PER_TRIAL
    step = window_s / count
    loop = asyncio.get_running_loop()
    start = loop.time()
    out: list[Scrape] = []
    async with server_metrics.client(api_key) as http:
        for i in range(count + 1):
            await asyncio.sleep(max(0.0, start + i * step - loop.time()))
            text = await server_metrics.fetch(http, url)
            if text is None:
                break
            out.append(parse_scrape(text, time.monotonic()))
    return out


def promql(source: PrometheusSource) -> str:
    """Every sglang: series of the deployment's server, in one instant vector."""
    return '{__name__=~"sglang:.+"' + (f",{source.selector}" if source.selector else "") + "}"


async def query_window(source: PrometheusSource, window_s: float, trials: int) -> list[Scrape]:
    """The last ``window_s`` from the Prometheus server, at the times a scraper would have scraped (no
    waiting: Prometheus has the past). Empty when it has none of the server's series."""
    count = trials * SCRAPES_PER_TRIAL
    end = time.time()
    out: list[Scrape] = []
    async with server_metrics.client(None) as http:
        for i in range(count + 1):
            at = end - window_s + i * window_s / count
            vector = await server_metrics.query(http, source.url, promql(source), at)
            if not vector:
                return []
            out.append(scrape_from_vector(vector, at))
    return out

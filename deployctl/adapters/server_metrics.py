"""GET the inference server's own Prometheus ``/metrics`` (SGLang with ``--enable-metrics``): the text, as is.

Parsing and judging are the core's (``deployctl.judge.passive``); this is only the HTTP request.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from deployctl.errors import EnvironmentUnfit

# httpx logs every request at INFO: a passive window's dozens of scrapes would bury what -v says.
logging.getLogger("httpx").setLevel(logging.WARNING)


async def fetch(client: httpx.AsyncClient, url: str) -> str | None:
    """The exposition at ``url``/metrics; None when the server serves none (404: metrics not enabled)."""
    try:
        resp = await client.get(url.rstrip("/") + "/metrics")
    except httpx.HTTPError as exc:
        raise EnvironmentUnfit(f"cannot read {url}/metrics: {type(exc).__name__}: {exc}") from exc
    if resp.status_code == 404:
        return None
    if resp.status_code != 200:
        raise EnvironmentUnfit(f"{url}/metrics answered HTTP {resp.status_code}")
    return resp.text


async def query(client: httpx.AsyncClient, prometheus: str, promql: str, at: float) -> list[dict[str, Any]]:
    """A Prometheus instant query at unix time ``at``: its ``data.result`` vector."""
    url = prometheus.rstrip("/") + "/api/v1/query"
    try:
        resp = await client.get(url, params={"query": promql, "time": f"{at:.3f}"})
        body = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise EnvironmentUnfit(f"cannot query Prometheus at {prometheus}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200 or body.get("status") != "success":
        raise EnvironmentUnfit(f"Prometheus at {prometheus} refused the query {promql!r}: "
                               f"HTTP {resp.status_code} {body.get('error', '')}".rstrip(),
                               hint="check policy.canary.prometheus.selector (PromQL label matchers)")
    return list(body["data"]["result"])


def client(api_key: str | None, timeout_s: float = 5.0) -> httpx.AsyncClient:
    headers = {"User-Agent": "deployctl-canary"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.AsyncClient(headers=headers, timeout=timeout_s)

"""Control requests to an SGLang server over httpx: /server_info, /model_info, /v1/models, /health.

The only importer of httpx for control-plane calls (the load itself goes through
``deployctl.adapters.http_load``). Versions differ: 0.4.x serves ``/get_server_info`` and
``/get_model_info``; 0.5.x serves ``/server_info`` and ``/model_info`` (log facts §8). A 404 on the new
name falls back to the old one. Transport failures become :class:`ServerUnreachable`.
"""

from __future__ import annotations

from typing import Any

import httpx

from deployctl.errors import DeployctlError


class ServerUnreachable(DeployctlError):
    pass


class ControlClient:
    """``async with ControlClient(url) as c: info = await c.server_info()``."""

    def __init__(self, base_url: str, *, timeout_s: float = 10.0, api_key: str | None = None) -> None:
        self._base = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None  # SGLang's --api-key
        self._client = httpx.AsyncClient(base_url=self._base, timeout=timeout_s, headers=headers)

    async def __aenter__(self) -> "ControlClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def server_info(self) -> dict[str, Any] | None:
        return await self._json("/server_info", "/get_server_info")

    async def model_info(self) -> dict[str, Any] | None:
        return await self._json("/model_info", "/get_model_info")

    async def model_ids(self) -> list[str]:
        data = await self._json("/v1/models")
        return [m["id"] for m in (data or {}).get("data", []) if isinstance(m, dict) and "id" in m]

    async def is_simulator(self) -> bool:
        """True when the server is deployctl's SGLang simulator (it serves ``/sim/telemetry``)."""
        data = await self._json("/sim/telemetry")
        return bool(data and data.get("simulated"))

    async def health(self) -> int:
        """The HTTP status of ``/health`` (200 ready, 503 starting)."""
        return (await self._get("/health")).status_code

    async def _json(self, *paths: str) -> dict[str, Any] | None:
        for path in paths:
            response = await self._get(path)
            if response.status_code == 404:
                continue
            if response.status_code != 200:
                return None
            try:
                data = response.json()
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
        return None

    async def _get(self, path: str) -> httpx.Response:
        try:
            return await self._client.get(path)
        except httpx.HTTPError as exc:
            raise ServerUnreachable(
                f"cannot reach the server at {self._base}{path}: {type(exc).__name__}: {exc}",
                hint="is the server running and listening there? (systemctl status <unit>, journalctl -u <unit>)",
            ) from None

"""The canary's webhook: one JSON POST (Slack-compatible ``text`` plus the structured facts).

Bounded: a few attempts with a short back-off, each with a timeout; a webhook that keeps failing is
reported and given up on, never raised — monitoring must not be able to fail the canary. The secret
(from a file, never the inventory) signs the body (``X-Deployctl-Signature: sha256=<HMAC>``); it is
never sent, logged or stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import httpx


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def read_secret(path: str | None) -> bytes | None:
    if path is None:
        return None
    return Path(path).read_bytes().strip()


def post(url: str, payload: Mapping[str, Any], *, secret: bytes | None = None, attempts: int = 3,
         timeout_s: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> str | None:
    """POST ``payload``; None on success, else why it failed after ``attempts`` tries."""
    body = json.dumps(payload, sort_keys=True, default=str).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "deployctl-canary"}
    if secret:
        headers["X-Deployctl-Signature"] = signature(secret, body)
    problem = "not attempted"
    for attempt in range(attempts):
        if attempt:
            sleep(min(2.0 ** attempt, 10.0))
        try:
            resp = httpx.post(url, content=body, headers=headers, timeout=timeout_s)
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"
            continue
        if resp.status_code < 300:
            return None
        problem = f"HTTP {resp.status_code}"
        if 400 <= resp.status_code < 500 and resp.status_code not in (408, 429):
            break  # the receiver refuses this payload: asking again gets the same answer
    return f"webhook {url} failed after {attempt + 1} attempt(s): {problem}"

"""The webhook adapter against a real local HTTP server: bounded retries, never an exception."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Iterator

import pytest

from deployctl.adapters.webhook import post, signature


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[bytes, str | None]], list[int]]]:
    seen: list[tuple[bytes, str | None]] = []
    statuses: list[int] = []  # answered in order; 200 once they run out

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            seen.append((self.rfile.read(int(self.headers["Content-Length"])), self.headers.get("X-Deployctl-Signature")))
            self.send_response(statuses.pop(0) if statuses else 200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/hook", seen, statuses
    httpd.shutdown()


def test_a_delivered_payload_is_signed_and_slack_compatible(server):
    url, seen, _ = server
    assert post(url, {"text": "glm5: degraded", "verdict": "degraded"}, secret=b"k", sleep=lambda s: None) is None
    body, sig = seen[0]
    assert json.loads(body)["text"] == "glm5: degraded" and sig == signature(b"k", body)


def test_server_errors_are_retried_a_bounded_number_of_times(server):
    url, seen, statuses = server
    statuses.extend([500, 503, 500, 500])
    waits: list[float] = []
    problem = post(url, {"text": "x"}, attempts=3, sleep=waits.append)
    assert problem is not None and "after 3 attempt(s): HTTP 500" in problem
    assert len(seen) == 3 and len(waits) == 2


def test_a_transient_error_then_success(server):
    url, seen, statuses = server
    statuses.append(502)
    assert post(url, {"text": "x"}, attempts=3, sleep=lambda s: None) is None and len(seen) == 2


def test_a_refused_payload_is_not_retried(server):
    url, seen, statuses = server
    statuses.append(400)
    assert "HTTP 400" in (post(url, {"text": "x"}, attempts=3, sleep=lambda s: None) or "")
    assert len(seen) == 1


def test_nobody_listening_is_reported_not_raised():
    problem = post("http://127.0.0.1:9/hook", {"text": "x"}, attempts=2, timeout_s=1, sleep=lambda s: None)
    assert problem is not None and "after 2 attempt(s)" in problem

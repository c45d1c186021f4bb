"""Background "user" traffic for a passive canary's tests: a bounded closed loop of completions against a
simulator on 127.0.0.1, from a few threads (no deployctl code: a user is not deployctl).

Bounded twice: at most ``max_requests`` in all and never beyond ``max_s`` seconds; errors (a restart
in between) are counted and retried after a pause, as a user's client would."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from prometheus_client.parser import text_string_to_metric_families


class UserLoad:
    def __init__(self, port: int, *, workers: int = 2, max_tokens: int = 128, max_requests: int = 20_000,
                 max_s: float = 240.0) -> None:
        self.url = f"http://127.0.0.1:{port}/v1/completions"
        self.workers, self.max_tokens, self.max_requests, self.max_s = workers, max_tokens, max_requests, max_s
        self.ok = self.failed = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "UserLoad":
        self._deadline = time.monotonic() + self.max_s
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(self.workers)]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _loop(self) -> None:
        body = json.dumps({"model": "default", "prompt": "a user's question", "max_tokens": self.max_tokens,
                           "ignore_eos": True}).encode()
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            with self._lock:
                if self.ok + self.failed >= self.max_requests:
                    return
            request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json",
                                                                           "User-Agent": "a-user/1.0"})
            try:
                with urllib.request.urlopen(request, timeout=30) as resp:
                    resp.read()
                with self._lock:
                    self.ok += 1
            except OSError:
                with self._lock:
                    self.failed += 1
                self._stop.wait(0.2)


def requests_by_source(port: int) -> dict[str, float]:
    """The simulator's ``sim_requests_total{source}``: generation requests served, by who sent them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {s.labels["source"]: s.value for f in text_string_to_metric_families(text) if f.name == "sim_requests"
            for s in f.samples if s.name == "sim_requests_total"}

"""After `canary rebaseline` the release is judged from the rebaseline on: its accepted speed is neither a step in
the change-point series nor measured against a reference from before. A window its users left half-way is never
pinned as a reference. The real ledger (SQLite), a real site, the watch's own scraper against an HTTP server
that exports SGLang's /metrics names for users it does not have (a passive watch sends no request anyway)."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest
import yaml
from support.runner_fakes import FakeBench, adapters
from support.sweeps import sweep

from deployctl.adapters.ledger import Ledger
from deployctl.commands.demo import demo_inventory
from deployctl.flows.canary_watch import PASSIVE_REFERENCE, rebaseline, watch
from deployctl.inventory.model import load_inventory
from deployctl.judge.watch import Health
from deployctl.operations.site import Site, make_site


class Users:
    """A server's /metrics under ``running`` users generating ``rate`` tokens/s each (±1 % a scrape)."""

    def __init__(self, running: float, rate: float) -> None:
        self.running, self.rate = running, rate
        self.generated, self.at = 0.0, time.monotonic()
        self._noise = random.Random(7)
        self._lock = threading.Lock()

    def exposition(self) -> str:
        with self._lock:
            now = time.monotonic()
            self.generated += self.rate * self.running * (now - self.at) * (1 + self._noise.gauss(0, 0.01))
            self.at = now
            return ("# TYPE sglang:generation_tokens_total counter\n"
                    f'sglang:generation_tokens_total{{model_name="m"}} {self.generated}\n'
                    "# TYPE sglang:num_running_reqs gauge\n"
                    f'sglang:num_running_reqs{{model_name="m"}} {self.running}\n'
                    "# TYPE sglang:num_queue_reqs gauge\n"
                    'sglang:num_queue_reqs{model_name="m"} 0\n')


@pytest.fixture
def users() -> Iterator[tuple[Users, int]]:
    state = Users(running=3.0, rate=50.0)

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = state.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, server.server_address[1]
    server.shutdown()


def _site(tmp_path, port: int) -> Site:
    demo_inventory(tmp_path / "inv.yaml")
    data = yaml.safe_load((tmp_path / "inv.yaml").read_text())
    data["deployments"]["glm5-sim"]["port"] = port
    # a 2 s window in 5 sub-windows; a 5 % limit: an 8 % slowdown is beyond it, ±1 % noise within
    data["policy"]["judge"] = {"min_trials": 2, "max_trials": 5, "limit_pct": 5}
    data["policy"]["canary"] = {"passive_window_s": 2}
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(data))
    return make_site(load_inventory(tmp_path / "inv.yaml"), "glm5-sim", tmp_path / "state",
                     {"DEPLOYCTL_UNIT_DIR": str(tmp_path / "etc")})


async def test_after_a_rebaseline_later_watches_of_the_unchanged_server_pass(tmp_path, users):
    server, port = users
    site = _site(tmp_path, port)
    a = adapters(bench_=FakeBench([sweep({1: [100.0, 100.0]})]))  # no sweep is asked for: users are served
    with Ledger.open(site.state_dir) as ledger:
        live = ledger.get(ledger.begin_release(deployment=site.name, kind="adopted", unit_name=site.unit,
                                               unit_text="x", unit_hash="h1", who="test", finished=True, live=True))
        before = [(await watch(ledger, site, a, live)).health for _ in range(3)]  # the first pins the reference
        server.rate = 46.0  # a real 8 % slowdown
        slowed = await watch(ledger, site, a, live)
        pinned = await rebaseline(ledger, site, a, live)  # the operator accepts the new speed
        after = [await watch(ledger, site, a, live) for _ in range(2)]
    assert before == [Health.OK] * 3
    assert slowed.health is Health.DEGRADED and slowed.mode == "passive", slowed.reasons
    assert "pinned a passive reference" in pinned and "at 3 running requests" in pinned
    # Before the fix the series was 100,100,100,92,92,92: "a persistent step of −8 % from watch 4 of 6".
    assert [w.health for w in after] == [Health.OK, Health.OK], [w.reasons for w in after]
    assert all(not w.verdict.shifts for w in after if w.verdict), [w.verdict.shifts for w in after if w.verdict]
    assert a.bench.calls == []


async def test_a_window_its_users_left_half_way_is_not_pinned_and_a_steady_one_is(tmp_path, users):
    server, port = users
    site = _site(tmp_path, port)
    a = adapters(bench_=FakeBench([sweep({1: [100.0, 100.0]})]))
    with Ledger.open(site.state_dir) as ledger:
        live = ledger.get(ledger.begin_release(deployment=site.name, kind="adopted", unit_name=site.unit,
                                               unit_text="x", unit_hash="h1", who="test", finished=True, live=True))
        asyncio.get_running_loop().call_later(1.1, setattr, server, "running", 0.0)  # they leave mid-window
        left = await watch(ledger, site, a, live)
        refused = [b for b in ledger.benches(live.id) if b.role == PASSIVE_REFERENCE]
        server.running = 2.0
        steady = await watch(ledger, site, a, live)
        pinned = [b for b in ledger.benches(live.id) if b.role == PASSIVE_REFERENCE]
    assert left.mode == "passive" and "its occupancy was not steady" in left.reference_from, left.reference_from
    assert refused == []
    assert steady.reference_from == "none yet at 2 running requests: this window is its reference"
    assert [b.bench.levels[0].concurrency for b in pinned] == [2]

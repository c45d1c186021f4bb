"""A release's reference is fixed once chosen: a later promote attempt's baseline of the same unit does not
move it (it used to: the newest stored baseline was the reference). The real ledger (SQLite), a real site."""

from __future__ import annotations

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
from deployctl.inventory.model import load_inventory
from deployctl.judge.noise import WATCH_AFTER_RESTART
from deployctl.flows.canary_watch import REFERENCE, WATCH, _noted_start, _reference, rebaseline, watch
from deployctl.operations.site import make_site
from deployctl.decisions.canary import ServerStart, WatchStart
from deployctl.decisions.evidence import bench_key


def test_the_stored_baseline_is_pinned_at_first_use_and_a_later_one_does_not_move_it(tmp_path):
    demo_inventory(tmp_path / "inv.yaml")
    site = make_site(load_inventory(tmp_path / "inv.yaml"), "glm5-sim", tmp_path / "state",
                     {"DEPLOYCTL_UNIT_DIR": str(tmp_path / "etc")})
    key = dict(unit_hash="h1", bench_key=bench_key(site.policy), host=site.host, sglang_version="0.5")
    with Ledger.open(site.state_dir) as ledger:
        live_id = ledger.begin_release(deployment=site.name, kind="adopted", unit_name=site.unit, unit_text="x",
                                       unit_hash="h1", who="test", finished=True, live=True, result="kept")
        other = ledger.begin_release(deployment=site.name, kind="promote", unit_name=site.unit, unit_text="y",
                                     unit_hash="h2", who="test", previous_id=live_id)
        ledger.save_bench(other, "baseline", sweep({8: [1000.0, 1001.0]}), **key)
        live = ledger.get(live_id)
        first, said, _, measured_at = _reference(ledger, site, live, "0.5")
        assert first is not None and first.levels[0].trials[0].output_tok_s == 1000.0
        assert "pinned as its reference" in said
        assert measured_at == ledger.benches(other)[0].at  # when the baseline was measured, not when pinned
        # a later promote attempt measures the same (now degraded) unit again
        later = ledger.begin_release(deployment=site.name, kind="promote", unit_name=site.unit, unit_text="z",
                                     unit_hash="h3", who="test", previous_id=live_id)
        ledger.save_bench(later, "baseline", sweep({8: [700.0, 701.0]}), **key)
        again, said, *_ = _reference(ledger, site, live, "0.5")
        assert again is not None and again.levels[0].trials[0].output_tok_s == 1000.0
        assert said == f"its pinned reference (release {live_id})"
        assert [b.role for b in ledger.benches(live_id)] == [REFERENCE]


def test_a_reference_measured_by_a_watch_names_the_start_that_watch_noted(tmp_path):
    with Ledger.open(tmp_path) as ledger:
        live = ledger.get(ledger.begin_release(deployment="glm5", kind="adopted", unit_name="u.service",
                                               unit_text="x", unit_hash="h1", who="test", finished=True, live=True))
        first = ledger.save_bench(live.id, WATCH, sweep({8: [1000.0, 1001.0]}), unit_hash="h1", bench_key="k")
        start = ServerStart("invocation-1", 100.0)
        ledger.record(live.id, "canary", "note", WATCH, WatchStart(start, first, None, None).to_dict())
        unnoted = ledger.save_bench(live.id, "candidate", sweep({8: [1000.0]}), unit_hash="h1", bench_key="k")
        assert _noted_start(ledger, live, first) == start
        assert _noted_start(ledger, live, unnoted) is None and _noted_start(ledger, live, None) is None


class _NoMetrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(404)  # a server started without --enable-metrics: the watch sweeps
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def no_metrics() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoMetrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


class Starts:
    """The unit's start as systemd states it; the test restarts the unit by naming another one."""

    def __init__(self, start: ServerStart) -> None:
        self.start = start

    async def live_report(self, name: str) -> None:
        return None

    async def live_start(self, name: str) -> ServerStart:
        return self.start


async def test_a_rebaseline_notes_its_start_and_only_a_watch_on_a_later_start_is_a_pair(tmp_path, no_metrics):
    demo_inventory(tmp_path / "inv.yaml")
    data = yaml.safe_load((tmp_path / "inv.yaml").read_text())
    data["deployments"]["glm5-sim"]["port"] = no_metrics
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(data))
    site = make_site(load_inventory(tmp_path / "inv.yaml"), "glm5-sim", tmp_path / "state",
                     {"DEPLOYCTL_UNIT_DIR": str(tmp_path / "etc")})
    a = adapters(bench_=FakeBench([sweep({8: [1000.0, 1010.0, 995.0, 1005.0, 1002.0]})] * 20))
    a.startup = Starts(ServerStart("first", time.time() - 60))
    with Ledger.open(site.state_dir) as ledger:
        live = ledger.get(ledger.begin_release(deployment=site.name, kind="adopted", unit_name=site.unit,
                                               unit_text="x", unit_hash="h1", who="test", finished=True, live=True))
        assert "pinned a synthetic reference" in await rebaseline(ledger, site, a, live)
        same = await watch(ledger, site, a, live)
        assert same.start.reference_start == ServerStart("first", a.startup.start.active_since)
        assert same.start.restart_between is False  # measured on the start its reference was: no pair
        a.startup = Starts(ServerStart("second", time.time()))
        later = await watch(ledger, site, a, live)
        assert later.start.restart_between is True and "measured on an earlier start" in later.reference_from
        pairs = ledger.restart_pairs(deployment=site.name, host=site.host, bench_key=bench_key(site.policy),
                                     exclude_releases=())
    assert [(p.before.role, p.after.id, p.source) for p in pairs] == [(REFERENCE, later.start.bench_id,
                                                                        WATCH_AFTER_RESTART)]

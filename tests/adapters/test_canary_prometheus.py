"""The passive watch read through a real Prometheus server's query API (Debian's prometheus binary, which
scripts/bootstrap puts in .venv/bin): Prometheus scrapes the simulator's SGLang /metrics every 0.5 s while a
bounded user loop runs; the watch then reads the last window back from Prometheus, with no request of ours."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request

from support.clirun import free_port
from support.promtool import binary
from support.users import UserLoad, requests_by_source

from deployctl.inventory.policy import PrometheusSource
from deployctl.judge.passive import idle, window_result
from deployctl.load.passive_watch import query_window
from deployctl.sim.probe import launch, wait_ready

QWEN = ("--model-path Qwen/Qwen3.5-122B-A10B --served-model-name qwen3.5-122b --tp 4 --enable-metrics").split()
ENV = {"SGLANG_SIM_SPEED": "0.2", "SGLANG_SIM_SEED": "7", "SGLANG_SIM_TIME_SCALE": "4",
       "SGLANG_SIM_GPU_NAME": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "SGLANG_SIM_GPU_COUNT": "4"}


def _scraped(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?query=up", timeout=2) as resp:
            return bool(json.loads(resp.read())["data"]["result"])
    except OSError:
        return False


def test_the_window_read_back_from_prometheus_is_judged_like_a_scraped_one(tmp_path):
    tool = binary("prometheus")
    sim = launch(QWEN, ENV, str(tmp_path))
    try:
        assert wait_ready(sim), sim.log()[-2000:]
        port = free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 500ms, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: sglang\n    static_configs: [{{targets: ['127.0.0.1:{sim.port}']}}]\n")
        server = subprocess.Popen([tool, f"--config.file={tmp_path / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not _scraped(port):  # ready, and the simulator scraped once
                assert time.monotonic() < deadline and server.poll() is None, "prometheus did not scrape"
                time.sleep(0.3)
            source = PrometheusSource(url=f"http://127.0.0.1:{port}", selector='job="sglang"')
            with UserLoad(sim.port, workers=2, max_tokens=64, max_requests=2_000, max_s=60):
                time.sleep(8)  # Prometheus collects a window of the users' load
                scrapes = asyncio.run(query_window(source, 6.0, 3))
            served = requests_by_source(sim.port)
            nobody = asyncio.run(query_window(PrometheusSource(url=source.url, selector='job="nobody"'), 6.0, 3))
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        sim.stop()
    assert len(scrapes) == 13 and not idle(scrapes)
    (level,) = window_result(scrapes, 3, time.time()).levels
    assert level.concurrency == 2 and sum(t.valid for t in level.trials) >= 2, level
    assert all(t.output_tok_s > 0 for t in level.trials if t.valid)
    assert served["deployctl"] == 0 and served["other"] > 0, served
    assert nobody == []  # another server's selector: nothing (the watch then says so and sweeps)

"""The conformance suite's reader of SGLang source (tests/support/sglang_source.py) on a small made-up wheel:
what it finds must be right before a pass of the suite means anything, and this runs without network."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from support.sglang_source import UNKNOWN, WheelSource

SERVER_ARGS = '''
import dataclasses
@dataclasses.dataclass
class ServerArgs:
    model_path: str
    port: int = 30000
    cuda_graph_max_bs: Optional[int] = None
    json_model_override_args: str = "{}"
    lora_paths: list = dataclasses.field(default_factory=list)
'''
SCHEDULER = '''
class Scheduler:
    def log(self, n, m, stats):
        logger.info(f"KV Cache is allocated. #tokens: {n}, KV size: {m:.2f} GB")
        logger.warning("Config file not found at %s, you can create them", path)
        msg = f"Prefill batch, #new-seq: {n}, "
        if stats:
            msg += f"#pending-token: {m}, "
        msg += f"input throughput (token/s): {m:.2f}"
        logger.info(msg)
        prompt = ""
        prompt += f"{n}"
        return web.Response(status=500, text=f"{action} failed: {msgs}")
'''
MIXIN = '''
class SchedulerMetricsMixin:
    def init_metrics(self):
        labels = {"model_name": "m", "engine_type": "unified", "tp_rank": 0, "pp_rank": 0}
'''
COLLECTOR = '''
class SchedulerMetricsCollector:
    def __init__(self, labels):
        self.running = Gauge(name="sglang:num_running_reqs", documentation="", labelnames=labels.keys())
class TokenizerMetricsCollector:
    def __init__(self, labels, bucket_time_to_first_token=None):
        if bucket_time_to_first_token is None:
            bucket_time_to_first_token = [0.1, 0.2, 0.4]
        self.prompt = Counter(name="sglang:prompt_tokens_total", documentation="",
                              labelnames=list(labels.keys()) + ["is_streaming"])
        self.ttft = Histogram(name="sglang:time_to_first_token_seconds", documentation="",
                              labelnames=[*labels.keys(), "is_streaming"], buckets=bucket_time_to_first_token)
'''
TOKENIZER = '''
class TokenizerManager:
    def init(self):
        self.metrics_collector = TokenizerMetricsCollector(labels={"model_name": "m"})
        meta_info["output_token_logprobs"] = []
'''


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> WheelSource:
    path = Path(tmp_path_factory.mktemp("wheel")) / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sglang/srt/server_args.py", SERVER_ARGS)
        zf.writestr("sglang/srt/managers/scheduler.py", "\ufeff" + SCHEDULER)  # a BOM, as some real files have
        zf.writestr("sglang/srt/managers/scheduler_metrics_mixin.py", MIXIN)
        zf.writestr("sglang/srt/metrics/collector.py", COLLECTOR)
        zf.writestr("sglang/srt/managers/tokenizer_manager.py", TOKENIZER)
        zf.writestr("sglang/benchmark/serving.py", 'logger.info(f"Prefill batch, {x}")')
    return WheelSource("9.9.9", path)


def test_defaults_are_the_literal_ones_with_where(src: WheelSource) -> None:
    assert src.defaults["port"] == (30000, "server_args.py:6")
    assert src.defaults["cuda_graph_max_bs"][0] is None and src.defaults["json_model_override_args"][0] == "{}"
    assert src.defaults["model_path"][0] is UNKNOWN and src.defaults["lora_paths"][0] is UNKNOWN


def test_a_line_is_produced_only_by_the_literal_parts_of_a_call(src: WheelSource) -> None:
    found = src.produced_by("KV Cache is allocated. #tokens: 100, KV size: 3.10 GB")
    assert found is not None and found.where == "managers/scheduler.py:4"
    assert src.produced_by("KV Cache is allocated. #tokens: 100, K size: 3.10 GB") is None  # another field
    assert src.produced_by("KV Cache is allocated.  #tokens: 100, KV size: 3.10 GB") is None  # spacing
    assert src.produced_by("Config file not found at /x.json, you can create them") is not None  # %s


def test_a_message_built_with_plus_equals_matches_with_or_without_its_optional_parts(src: WheelSource) -> None:
    for line in ("Prefill batch, #new-seq: 1, #pending-token: 5, input throughput (token/s): 0.00",
                 "Prefill batch, #new-seq: 1, input throughput (token/s): 0.00"):
        found = src.produced_by(line)
        assert found is not None and found.where.startswith("managers/scheduler.py"), line
    # in another order it is not SGLang's line; the benchmark's f"Prefill batch, {x}" is not the server's
    assert src.produced_by("Prefill batch, input throughput (token/s): 0.00, #new-seq: 1") is None
    # ``prompt = ""`` then ``prompt += …`` is no message: it would match anything
    assert src.produced_by("anything at all, really") is None


def test_a_template_of_mostly_fields_does_not_claim_a_long_line(src: WheelSource) -> None:
    (failed,) = [t for t in src.templates("sglang/srt/managers/scheduler.py") if t.text == "{…} failed: {…}"]
    # 9 literal characters have not printed this line, though the pattern matches it
    assert failed.pattern.fullmatch("Capture cuda graph failed: CUDA out of memory. Tried to allocate 6.00 MiB.")
    assert not failed.prints("Capture cuda graph failed: CUDA out of memory. Tried to allocate 6.00 MiB.")
    assert failed.prints("x failed: y")  # a short line: 9 of its 11 characters are literal


def test_metrics_with_the_labels_their_callers_pass_and_literal_buckets(src: WheelSource) -> None:
    running, prompt, ttft = (src.metrics[n] for n in ("sglang:num_running_reqs", "sglang:prompt_tokens",
                                                       "sglang:time_to_first_token_seconds"))
    assert (running.kind, running.labels) == ("Gauge", ("engine_type", "model_name", "pp_rank", "tp_rank"))
    assert (prompt.kind, prompt.labels) == ("Counter", ("is_streaming", "model_name"))  # _total dropped
    assert (ttft.labels, ttft.buckets) == (("is_streaming", "model_name"), (0.1, 0.2, 0.4))


def test_class_fields_and_string_keys(src: WheelSource) -> None:
    fields, where = src.class_fields("sglang/srt/server_args.py", "ServerArgs")
    assert {"model_path", "port"} <= fields and where == "server_args.py:4"
    assert src.has_string("sglang/srt/managers/tokenizer_manager.py", "output_token_logprobs") is not None
    assert src.has_string("sglang/srt/managers/tokenizer_manager.py", "input_token_logprobs") is None

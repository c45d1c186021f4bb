"""Conformance: the simulator, the startup parser, the passive canary and the output gate against the source
of the real SGLang wheels they stand for (tests/support/sglang_source.py reads them; nothing is imported
or run). One test per check and version; a mismatch says what and where, e.g.
``sglang 0.5.23: --cuda-graph-max-bs: simulator int, SGLang int but default 512 vs 160 (server_args.py:NNN)``.
Deliberate differences are listed, each with its reason, in tests/data/sglang-conformance-exceptions.yaml;
an exception nothing needs any more fails too. The table of what is checked per version: docs/sim.md.
"""

from __future__ import annotations

import contextlib
import io
import re
from functools import lru_cache
from types import SimpleNamespace

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support.sglang_source import UNKNOWN, source
from support.sglang_wheels import VERSIONS, wheel
from support.simlog import expectation, resolved, simulate
from testpaths import DATA

from deployctl.judge import passive
from deployctl.preflight.extract import extract_flag_table
from deployctl.preflight.flagtable import FlagTable
from deployctl.preflight.sources import WheelSource
from deployctl.sim import cli
from deployctl.sim.answers import Completion, Step, logprob_fields
from deployctl.sim.batchlog import BatchLog
from deployctl.sim.metrics import SimMetrics
from deployctl.sim.resolve import _field_defaults
from deployctl.startup import failure, patterns
from deployctl.startup.lines import split_records
from deployctl.startup.readiness import READY_LINE

EXCEPTIONS = DATA / "sglang-conformance-exceptions.yaml"
# The startup fixtures (tests/data/logs) whose command the simulator runs per version: the incidents' (01, 02:
# Qwen3.5 with MTP, with and without the fusion flags; 03: GLM-5) and Qwen3-235B FP8 (08), on every version
# whose argparse takes them (0.4.10.post2 lacks the Qwen3.5 flags and glm47, 0.5.9 the fused-MoE flag), with
# the flags 0.5.23 renamed (RENAMED_0_5_23).
FIXTURES = {"0.4.10.post2": ("08",), "0.5.9": ("01", "03", "08"), "0.5.10": ("01", "02", "03", "08"),
            "0.5.23": ("01", "02", "03", "08")}
RENAMED_0_5_23 = (("--nsa-", "--dsa-"), ("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy"))
FAULTS = ("oom_kv_cache", "oom_cuda_graph")  # the simulated failures whose lines the parser classifies
TQDM = re.compile(r":? +\d+%\|.*$")
PREFIX = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: TP\d+(?: EP\d+)?)?\] ")
PASSIVE_READS = (passive.GENERATION, passive.PROMPT, passive.RUNNING, passive.QUEUED, passive.TTFT, passive.ITL,
                 passive.E2E, passive.FINISHED, passive.ABORTED)


def _as(prefix: str, version: str) -> dict:
    expect = {**expectation(prefix), "sglang_version": {"true_version": version}}
    for old, new in RENAMED_0_5_23 if version == "0.5.23" else ():
        expect["command"] = expect["command"].replace(old, new)
    return expect


def _simulate(prefix: str, version: str, faults: str = "") -> tuple[str, int | None]:
    """The fixture's command and environment on the simulator as SGLang ``version``: its startup log, then
    the serving lines its scheduler prints (a prefill with requests waiting, a decode line)."""
    log, code = simulate(_as(prefix, version), faults)
    serving: list[str] = []
    batches = BatchLog(resolved(_as(prefix, version)),
                       lambda rank, text: serving.append(f"[2026-01-01 00:00:00 TP{rank}] {text}"))
    batches.prefill(4, 4000, 4, 2, 4000, 0.5, pending=2000)
    batches.tick(4, 4)
    batches.decode(4, 2, 8000)
    return log + "".join(line + "\n" for line in serving), code


@lru_cache(maxsize=1)
def _exceptions() -> tuple[dict, ...]:
    entries = tuple(yaml.safe_load(EXCEPTIONS.read_text()))
    for entry in entries:
        assert set(entry) == {"check", "version", "subject", "reason"} and entry["reason"].strip(), \
            f"{EXCEPTIONS.name}: each entry is check, version, subject and a reason: {entry}"
    return entries


def _verdict(check: str, version: str, mismatches: dict[str, str]) -> None:
    """Fail with every mismatch not excepted, and every exception of this check and version not needed."""
    listed = [e for e in _exceptions() if e["check"] == check and e["version"] in (version, "*")]
    excepted = {subject for subject in mismatches for e in listed if subject.startswith(e["subject"])}
    unused = [e["subject"] for e in listed if e["version"] == version
              and not any(s.startswith(e["subject"]) for s in mismatches)]
    problems = [f"sglang {version}: {mismatches[s]}" for s in sorted(mismatches) if s not in excepted]
    problems += [f"sglang {version}: exception {s!r} ({check}) in {EXCEPTIONS.name} matches nothing: remove it"
                 for s in unused]
    assert not problems, "\n".join(problems)


@lru_cache(maxsize=None)
def _flag_table(version: str) -> FlagTable:
    src = WheelSource(wheel(version))
    try:
        return extract_flag_table(src, version)
    finally:
        src.close()


def _kind(value: object) -> str:
    """A default's type for the message: ``int``, ``a list``, ``None``; ``?`` where it is not a literal."""
    if value is UNKNOWN:
        return "?"
    return "a list" if isinstance(value, list) else type(value).__name__ if value is not None else "None"


# 1. flags ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_simulator_flags_are_that_versions(version: str) -> None:
    table, src = _flag_table(version), source(version)
    sim = {action["opts"][0]: action for action in cli._specs()[version]["actions"]}
    real = {flag.option_strings[0]: flag for flag in table.flags if flag.action != "help"}
    sim_defaults = dict(_field_defaults(version))
    mismatches: dict[str, str] = {}
    for opt in sorted(set(sim) - set(real)):
        mismatches[opt] = f"{opt}: the simulator accepts it, SGLang has no such flag"
    for opt in sorted(set(real) - set(sim)):
        mismatches[opt] = f"{opt}: SGLang has it, the simulator refuses it"
    for opt in sorted(set(sim) & set(real)):
        action, flag = sim[opt], real[opt]
        field = cli._FIELD_OF_DEST.get(flag.dest, flag.dest)
        real_type = flag.value_type if flag.value_type in ("int", "float") else None
        sim_type = action.get("type")
        default, where = src.defaults.get(field, (UNKNOWN, "?"))
        sim_default = sim_defaults.get(field, UNKNOWN)
        said = []
        if sorted(action["opts"]) != sorted(flag.option_strings):
            said.append(f"option strings {action['opts']} vs {list(flag.option_strings)}")
        real_choices = list(flag.choices) if flag.choices is not None and action["action"] == "store" else None
        if action.get("choices") != real_choices:
            said.append(f"choices {action.get('choices')} vs {flag.choices}")
        if sim_type != real_type:
            said.append(f"type {sim_type} vs {real_type}")
        if default is not UNKNOWN and sim_default is not UNKNOWN and sim_default != default:
            said.append(f"default {sim_default!r} vs {default!r}")
        if said:
            mismatches[opt] = (f"{opt}: simulator {sim_type or _kind(sim_default)}, SGLang {real_type or _kind(default)} "
                               f"but {'; '.join(said)} ({where})")
    _verdict("flags", version, mismatches)


@pytest.mark.parametrize("version", VERSIONS)
def test_simulator_refuses_the_flags_that_version_lacks(version: str) -> None:
    """A flag of another supported release that is neither this one's nor an abbreviation of one of its
    flags (allow_abbrev) ends argparse with exit 2, in SGLang and so in the simulator."""
    own = _flag_table(version).option_strings
    others = sorted({o for v in VERSIONS if v != version for o in _flag_table(v).option_strings} - set(own))
    lacking = [o for o in others if o.startswith("--") and not any(mine.startswith(o) for mine in own)]
    parser = cli.build_parser(version)
    accepted = []
    for opt in lacking:
        with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit) as exited:
            parser.parse_args(["--model-path", "m", opt, "1"])
        if exited.value.code != 2:
            accepted.append(opt)
    assert lacking and not accepted, f"sglang {version}: the simulator accepts {accepted}"


# 2. startup log lines --------------------------------------------------------------------------------------


def _parser_reads(text: str) -> bool:
    """Whether the startup parser takes a fact from this message (its patterns, its failure patterns but
    the C-level fatal lines, and its prefixes)."""
    regexes = [v for k, v in vars(patterns).items() if k.endswith("_RE") and k not in ("FLAG_RE", "OPTION_RE")]
    regexes += [failure.EXCEPTION_LINE_RE, failure.CAPTURE_FAILED_RE, failure.RANK_DIED_RE]
    return (any(r.search(text) for r in regexes) or patterns.read_summary(text) is not None
            or text.startswith(("server_args=", "Decode batch", "Prefill batch", "Disable piecewise", READY_LINE)))


def _message(text: str) -> str:
    """What SGLang's source wrote: a meter's desc; an exception line without the type Python prints."""
    text = TQDM.sub("", text)
    raised = failure.EXCEPTION_LINE_RE.match(text)
    return raised.group(2) or "" if raised else text


@pytest.mark.parametrize("version", VERSIONS)
def test_parsed_startup_lines_are_printed_as_that_version_prints_them(version: str) -> None:
    src = source(version)
    mismatches: dict[str, str] = {}
    # Excepted lines are not searched for (a line that matches nothing costs seconds); for the stale-exception
    # check each still counts as a mismatch when the simulator prints it.
    skip = tuple(e["subject"] for e in _exceptions() if e["check"] == "log" and e["version"] in (version, "*"))
    runs = [(prefix, "") for prefix in FIXTURES[version]] + [(FIXTURES[version][0], f) for f in FAULTS]
    for prefix, fault in runs:
        log, code = _simulate(prefix, version, fault)
        assert (code is None) == (not fault), f"fixture {prefix} with faults {fault!r} on the simulator: exit {code}"
        for raw in log.splitlines():
            for record in split_records(raw):
                if not _parser_reads(record.text):
                    continue
                text = _message(record.text)
                if text in mismatches:
                    continue
                if text.startswith(skip) or src.produced_by(text) is None:
                    mismatches[text] = (f"startup line {text[:160]!r} (fixture {prefix}{', ' + fault if fault else ''}) "
                                        "matches no string of its source")
    _verdict("log", version, mismatches)


@pytest.mark.parametrize("version", VERSIONS)
def test_log_prefix_is_that_versions(version: str) -> None:
    """``[2026-01-01 00:00:00 TP3] ``: configure_logger's ``[%(asctime)s{prefix}] %(message)s`` with its
    datefmt, the scheduler's `` TP{rank}`` (`` EP{rank}`` after it with expert parallelism)."""
    texts = source(version).texts.values()
    assert any("[%(asctime)s{" in t and "}] %(message)s" in t for t in texts), f"sglang {version}: log format changed"
    assert any('"%Y-%m-%d %H:%M:%S"' in t for t in texts), f"sglang {version}: datefmt changed"
    assert any('f" TP{' in t for t in texts), f"sglang {version}: the scheduler's TP prefix changed"
    log, _ = _simulate(FIXTURES[version][0], version)
    prefixes = {m.group(0) for m in re.finditer(r"^\[[^]]*\] ", log, re.MULTILINE)}
    assert prefixes and all(PREFIX.fullmatch(p) for p in prefixes), sorted(prefixes)


# 3. metrics ------------------------------------------------------------------------------------------------


def _sim_families(version: str) -> dict[str, tuple[str, frozenset[str], tuple[float, ...] | None]]:
    engine = SimpleNamespace(prompt_tokens_total=0, generation_tokens_total=0, running=[], waiting=[],
                             kv_tokens_used=lambda: 0)
    metrics = SimMetrics(engine, "m", lambda: 1000, version)
    metrics.served("other", 0.0, 0.1, 1.0, 10, stream=True)
    metrics.failed("other", stream=False)
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        if not family.name.startswith("sglang:") or family.name.endswith("_created"):
            continue
        labels = frozenset(k for s in family.samples for k in s.labels if k != "le")
        les = sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels} - {float("inf")})
        out[family.name] = (family.type, labels, tuple(les) if family.type == "histogram" else None)
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_metrics_are_that_versions(version: str) -> None:
    real = source(version).metrics
    sim = _sim_families(version)
    mismatches: dict[str, str] = {}
    for name, (kind, labels, buckets) in sorted(sim.items()):
        metric = real.get(name)
        if metric is None:
            mismatches[name] = f"{name}: the simulator exports it, {source(version).collector} defines no such metric"
            continue
        said = []
        if metric.kind.lower() != kind:
            said.append(f"type {kind} vs {metric.kind.lower()}")
        if metric.labels is not None and labels != set(metric.labels):
            said.append(f"labels {sorted(labels)} vs {sorted(metric.labels)}")
        if buckets is not None and metric.buckets is not None and buckets != metric.buckets:
            said.append(f"buckets {list(buckets)} vs {list(metric.buckets)}")
        if said:
            mismatches[name] = f"{name}: simulator vs SGLang: {'; '.join(said)} ({metric.where})"
    for names in PASSIVE_READS:
        bare = [n.removesuffix("_total") for n in names]
        if not any(n in real for n in bare):
            mismatches[names[0]] = (f"{names[0]}: the passive canary reads it, {source(version).collector} has none "
                                    f"of {list(names)}")
        elif not any(n in sim for n in bare):
            mismatches[names[0]] = f"{names[0]}: the passive canary reads it, the simulator does not export it"
    _verdict("metrics", version, mismatches)


# 4. the output gate's fields ------------------------------------------------------------------------------

# What deployctl.adapters.sglang_logprobs sends to /generate and reads back, and what the simulator's
# /v1/completions takes and answers (OpenAI's completions logprobs).
GENERATE_SENT = ("text", "input_ids", "sampling_params", "return_logprob", "logprob_start_len", "top_logprobs_num",
                 "return_text_in_logprobs")
SAMPLING_SENT = ("temperature", "max_new_tokens")
COMPLETIONS_TAKEN = ("prompt", "max_tokens", "temperature", "logprobs", "echo")


def _sim_meta_keys() -> set[str]:
    step = Step(token=5, logprob=-0.5, top=((5, -0.5),))
    done = Completion(text="x", prompt_ids=(1, 2), output=(step,), input_steps=(None, step))
    return set(logprob_fields(done, 1, False))


@pytest.mark.parametrize("version", VERSIONS)
def test_output_gate_fields_are_that_versions(version: str) -> None:
    src = source(version)
    mismatches: dict[str, str] = {}
    io_struct = "sglang/srt/managers/io_struct.py"
    fields, where = src.class_fields(io_struct, "GenerateReqInput")
    for name in GENERATE_SENT:
        if name not in fields:
            mismatches[f"GenerateReqInput.{name}"] = (f"/generate: the output gate sends {name}, GenerateReqInput has "
                                                      f"no such field ({where})")
    sampling = "sglang/srt/sampling/sampling_params.py"
    for name in SAMPLING_SENT:
        if src.has_string(sampling, name) is None and f"{name}:" not in src.texts[sampling]:
            mismatches[f"SamplingParams.{name}"] = f"sampling_params.{name}: SamplingParams takes no such parameter"
    for key in sorted(_sim_meta_keys()):
        if src.has_string("sglang/srt/managers/tokenizer_manager.py", key) is None:
            mismatches[f"meta_info.{key}"] = f"meta_info.{key}: read by the output gate, tokenizer_manager.py never sets it"
    protocol = "sglang/srt/entrypoints/openai/protocol.py"
    request, where = src.class_fields(protocol, "CompletionRequest")
    for name in COMPLETIONS_TAKEN:
        if name not in request:
            mismatches[f"CompletionRequest.{name}"] = f"/v1/completions: {name} is no CompletionRequest field ({where})"
    logprobs, where = src.class_fields(protocol, "LogProbs")
    for name in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        if name not in logprobs:
            mismatches[f"LogProbs.{name}"] = (f"/v1/completions: the simulator answers logprobs.{name}, LogProbs has "
                                              f"no such field ({where})")
    _verdict("api", version, mismatches)

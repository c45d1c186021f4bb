"""Which SGLang version wrote a log: evidence, not a guess (pure).

SGLang never prints its version in the log. What a log does hold are cues that exist only from or until
some release: a line's wording (``Load weight end.`` with or without ``elapsed=``), the argparse prog,
the dump's field set. Each cue bounds the version to a window of releases; the answer is the
intersection of the windows, reported as one release when a single one is left, a range otherwise,
or unknown when there are no cues or they contradict each other (a fork, a patched build).

The windows come from the released wheels we read (facts/sglang-serverargs-fields.json and the format
strings cited in docs/startup.md): a cue seen in sampled release S and absent from the sample before
it, P, appeared somewhere after P, so its window starts at the release after P — never at S, which
would be a guess. No fact in the report depends on the version: it is told, never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from deployctl.startup.serverargs import known_field_sets

# Every SGLang release on PyPI from 0.2.0 to the newest we read (0.5.23), oldest first.
RELEASES: tuple[str, ...] = (
    "0.2.0", "0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5", "0.2.6", "0.2.7", "0.2.8", "0.2.9", "0.2.9.post1",
    "0.2.10", "0.2.11", "0.2.12", "0.2.13", "0.2.14", "0.2.14.post1", "0.2.14.post2", "0.2.15",
    "0.3.0", "0.3.1", "0.3.1.post1", "0.3.1.post2", "0.3.1.post3", "0.3.2", "0.3.3", "0.3.3.post1",
    "0.3.4", "0.3.4.post1", "0.3.4.post2", "0.3.5", "0.3.5.post1", "0.3.5.post2", "0.3.6", "0.3.6.post1",
    "0.3.6.post2", "0.3.6.post3", "0.4.0", "0.4.0.post1", "0.4.0.post2", "0.4.1", "0.4.1.post1",
    "0.4.1.post2", "0.4.1.post3", "0.4.1.post4", "0.4.1.post5", "0.4.1.post6", "0.4.1.post7", "0.4.2",
    "0.4.2.post1", "0.4.2.post2", "0.4.2.post3", "0.4.2.post4", "0.4.3", "0.4.3.post1", "0.4.3.post2",
    "0.4.3.post3", "0.4.3.post4", "0.4.4", "0.4.4.post1", "0.4.4.post2", "0.4.4.post3", "0.4.4.post4",
    "0.4.5", "0.4.5.post1", "0.4.5.post2", "0.4.5.post3", "0.4.6", "0.4.6.post1", "0.4.6.post2",
    "0.4.6.post3", "0.4.6.post4", "0.4.6.post5", "0.4.7", "0.4.7.post1", "0.4.8", "0.4.8.post1", "0.4.9",
    "0.4.9.post1", "0.4.9.post2", "0.4.9.post3", "0.4.9.post4", "0.4.9.post5", "0.4.9.post6", "0.4.10",
    "0.4.10.post1", "0.4.10.post2", "0.5.1", "0.5.1.post1", "0.5.1.post2", "0.5.1.post3", "0.5.2", "0.5.3",
    "0.5.3.post1", "0.5.3.post2", "0.5.3.post3", "0.5.4", "0.5.4.post1", "0.5.4.post2", "0.5.4.post3",
    "0.5.5", "0.5.5.post1", "0.5.5.post2", "0.5.5.post3", "0.5.6", "0.5.6.post1", "0.5.6.post2", "0.5.7",
    "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1",
    "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19",
    "0.5.20", "0.5.21", "0.5.22", "0.5.23",
)
_INDEX = {version: index for index, version in enumerate(RELEASES)}
# Below this the log format is not read: 0.2.x shares 0.3.0's prefix but few of its lines.
SUPPORTED_FLOOR = "0.3.0"


def _after(version: str) -> str:
    return RELEASES[_INDEX[version] + 1]


def _before(version: str) -> str:
    return RELEASES[_INDEX[version] - 1]


@dataclass(frozen=True)
class Cue:
    """A log feature and the releases that can print it (inclusive; None: unbounded that side)."""

    reason: str
    low: str | None = None
    high: str | None = None


# The format cues (sampled wheels: 0.2.15, 0.3.2, 0.3.6, 0.4.3, 0.4.10.post2, 0.5.4, 0.5.8, 0.5.9,
# 0.5.10, 0.5.23). Each window runs from the release after the last sample without the feature to the
# release before the first sample without it again.
CUES: dict[str, Cue] = {cue.reason: cue for cue in (
    Cue("time-only '[HH:MM:SS]' stamps (datefmt %H:%M:%S until 0.3.5)", None, _before("0.3.6")),
    Cue("'Init nccl begin.' (until 0.3.5)", None, _before("0.3.6")),
    Cue("'Init torch distributed begin.' (0.3.3 … 0.5.22)", _after("0.3.2"), _before("0.5.23")),
    Cue("'Init parallel begin.' (after 0.5.10)", _after("0.5.10"), None),
    Cue("'Init torch distributed ends.' without elapsed= (0.4.3.post1 … 0.5.8.post1)", _after("0.4.3"),
        _before("0.5.9")),
    Cue("'Init torch distributed ends. elapsed=' (0.5.8.post1 … 0.5.22)", _after("0.5.8"), _before("0.5.23")),
    Cue("scheduler summary without chunked_prefill_size= (until 0.4.2)", None, _before("0.4.3")),
    Cue("scheduler summary without available_gpu_mem= (until 0.4.10.post1)", None, _before("0.4.10.post2")),
    Cue("scheduler summary with available_gpu_mem= (from 0.4.3.post1)", _after("0.4.3"), None),
    Cue("'Load weight end.' without mem usage= (until 0.4.10.post1)", None, _before("0.4.10.post2")),
    Cue("'Load weight end.' with mem usage= and without elapsed= (0.4.3.post1 … 0.5.8.post1)",
        _after("0.4.3"), _before("0.5.9")),
    Cue("'Load weight end.' with elapsed= and dtype= (0.5.8.post1 … 0.5.9)", _after("0.5.8"), "0.5.9"),
    Cue("'Load weight end.' with elapsed= and without dtype= (from 0.5.10)", _after("0.5.9"), None),
    Cue("'KV Cache is allocated.' without #tokens (0.3.6.post1 … 0.4.10.post1)", _after("0.3.6"),
        _before("0.4.10.post2")),
    Cue("'KV Cache is allocated. #tokens:' (0.4.3.post1 … 0.5.22)", _after("0.4.3"), _before("0.5.23")),
    Cue("'KV Cache is allocated. dtype:' (after 0.5.10)", _after("0.5.10"), None),
    Cue("'Capture cuda graph begin.' without avail mem= (until 0.4.10.post1)", None, _before("0.4.10.post2")),
    Cue("'Capture cuda graph begin.' with avail mem= (0.4.3.post1 … 0.5.22)", _after("0.4.3"), _before("0.5.23")),
    Cue("'Capture … CUDA graph begin. backend=' (after 0.5.10)", _after("0.5.10"), None),
    Cue("'Capture piecewise CUDA graph' (0.5.4.post1 … 0.5.22)", _after("0.5.4"), _before("0.5.23")),
    Cue("'Prefill batch.' with a period (until 0.5.3)", None, _before("0.5.4")),
    Cue("'Prefill batch,' with a comma (from 0.5.4.post1)", _after("0.5.4"), None),
    Cue("warm-up polls GET /get_model_info (until 0.5.7)", None, _before("0.5.8")),
    Cue("'Endpoint '/get_model_info' is deprecated' (from 0.5.4.post1)", _after("0.5.4"), None),
    Cue("'Received sigquit from a child proces.' (typo, until 0.5.3)", None, _before("0.5.4")),
    Cue("launch_server UserWarning 'sglang serve' is the recommended entrypoint (from 0.5.10)", _after("0.5.9"), None),
    Cue("argparse prog 'sglang serve' (from 0.5.10)", _after("0.5.9"), None),
    Cue("argparse prog 'launch_server.py' (until 0.5.9)", None, "0.5.9"),
    Cue("dict dump 'server_args={…}' (after 0.5.10)", _after("0.5.10"), None),
    Cue("'kill_process_tree called:' (after 0.5.10)", _after("0.5.10"), None),
    Cue("dataclass dump 'server_args=ServerArgs(…)' (until 0.5.22)", None, _before("0.5.23")),
)}


@dataclass(frozen=True)
class VersionEvidence:
    version: str | None  # one release: stated, or the only one the cues leave
    source: str | None  # server_info | log_exact | log_inferred
    range: str | None  # "0.5.1 … 0.5.8.post1", "0.5.10 or newer", "0.4.2 or older"
    cues: tuple[str, ...]
    older_than_supported: bool = False
    contradiction: str | None = None  # the two cues that exclude each other, when they do

    @property
    def evidence(self) -> str | None:
        return "; ".join(self.cues) or None


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:4])


def _sampled() -> list[tuple[str, frozenset[str]]]:
    return sorted(known_field_sets().items(), key=lambda item: _key(item[0]))


def field_cues(names: Iterable[str], *, complete: bool, label: str, upper: bool = True) -> list[Cue]:
    """Windows from the dump's (or usage block's) field names against the sampled ServerArgs.

    A present field bounds the version to the samples that have it; an absent field (only when the
    dump is complete: a cut dump lacks fields for no reason) bounds it away from a run of samples at
    either end that all have it. ``upper=False`` for option names: a deprecated flag outlives its
    field (``--prefill-round-robin-balance`` in 0.5.9), so an option bounds the version from below only."""
    samples = _sampled()
    present = set(names)
    low_i, high_i = 0, len(RELEASES) - 1
    low_why = high_why = ""
    for field_name in present:
        has = [index for index, (_, known) in enumerate(samples) if field_name in known]
        if not has:
            continue  # a fork's field, or one added and removed between samples
        first, last = has[0], has[-1]
        if first > 0 and _INDEX[_after(samples[first - 1][0])] > low_i:
            low_i, low_why = _INDEX[_after(samples[first - 1][0])], field_name
        if upper and last < len(samples) - 1 and _INDEX[_before(samples[last + 1][0])] < high_i:
            high_i, high_why = _INDEX[_before(samples[last + 1][0])], field_name
    if complete:
        all_known = set().union(*(known for _, known in samples))
        for field_name in all_known - present:
            has = [index for index, (_, known) in enumerate(samples) if field_name in known]
            contiguous = has == list(range(has[0], has[-1] + 1))
            if contiguous and has[-1] == len(samples) - 1 and has[0] > 0:
                bound = _INDEX[_before(samples[has[0]][0])]  # it appeared at the latest with that sample
                if bound < high_i:
                    high_i, high_why = bound, f"no {field_name}"
            elif contiguous and has[0] == 0 and has[-1] < len(samples) - 1:
                bound = _INDEX[_after(samples[has[-1]][0])]  # it was dropped after that sample
                if bound > low_i:
                    low_i, low_why = bound, f"no {field_name}"
    cues = []
    if low_why:
        cues.append(Cue(f"{label}: {low_why} (from {RELEASES[low_i]})", RELEASES[low_i], None))
    if high_why:
        cues.append(Cue(f"{label}: {high_why} (until {RELEASES[high_i]})", None, RELEASES[high_i]))
    return cues


def decide(cues: Iterable[Cue], *, server_info_version: str | None = None,
           stated: tuple[str, str] | None = None) -> VersionEvidence:
    """Intersect the windows of every cue into one release, a range, or unknown. ``stated`` is
    (version, line) when the log itself names the version (``sglang: 0.5.9`` from ``sglang.check_env``,
    an image tag ``lmsysorg/sglang:v0.5.9-cu129``): it is taken when the cues allow it."""
    chosen = list(cues)
    reasons = tuple(cue.reason for cue in chosen)
    if server_info_version is not None:
        return VersionEvidence(server_info_version, "server_info", None, ("GET /server_info version", *reasons))
    low = max((_INDEX[c.low] for c in chosen if c.low is not None), default=0)
    high = min((_INDEX[c.high] for c in chosen if c.high is not None), default=len(RELEASES) - 1)
    if stated is not None and low <= high:
        version, said = stated
        if version not in _INDEX or low <= _INDEX[version] <= high:
            return VersionEvidence(version, "log_exact", None, (f"stated in the log: {said}", *reasons))
        clash = f"the log says {said!r}, but its format needs {RELEASES[low]} … {RELEASES[high]}"
        return VersionEvidence(None, None, None, ("the log's stated version contradicts its format", *reasons),
                               contradiction=clash)
    if not chosen:
        return VersionEvidence(None, None, None, ())
    if low > high:
        # Reported as it is, never narrowed to a range: no release prints both lines.
        newest = max((c for c in chosen if c.low is not None), key=lambda c: _INDEX[c.low])  # type: ignore[index]
        oldest = min((c for c in chosen if c.high is not None), key=lambda c: _INDEX[c.high])  # type: ignore[index]
        clash = (f"{newest.reason} needs {newest.low} or newer, but {oldest.reason} needs {oldest.high} or older")
        return VersionEvidence(None, None, None, ("the cues contradict each other (a fork or a patched "
                                                  "build?)", *reasons), contradiction=clash)
    older = _INDEX[SUPPORTED_FLOOR] > high
    if low == high:
        return VersionEvidence(RELEASES[low], "log_inferred", RELEASES[low], reasons, older)
    has_low = any(c.low is not None for c in chosen)
    has_high = any(c.high is not None for c in chosen)
    if has_low and high == len(RELEASES) - 1:
        text = f"{RELEASES[low]} or newer"
    elif has_high and low == 0:
        text = f"{RELEASES[high]} or older"
    else:
        text = f"{RELEASES[low]} … {RELEASES[high]}"
    return VersionEvidence(None, None, text, reasons, older)


def in_range(version: str, evidence: VersionEvidence) -> bool:
    """Whether a release is consistent with the evidence (for tests and for checking a claim)."""
    if evidence.version is not None:
        return evidence.version == version
    if evidence.range is None:
        return True
    text = evidence.range
    if text.endswith(" or newer"):
        return _key(version) >= _key(text.removesuffix(" or newer"))
    if text.endswith(" or older"):
        return _key(version) <= _key(text.removesuffix(" or older"))
    low, high = text.split(" … ")
    return _key(low) <= _key(version) <= _key(high)


def server_info_version(info: Mapping[str, object] | None) -> str | None:
    value = (info or {}).get("version")
    return value if isinstance(value, str) else None

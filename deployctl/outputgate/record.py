"""The baseline's reference outputs as the ledger stores them: what the candidate is compared with, keyed
so only a like-for-like set is reused (same unit, host, SGLang version, GPU, probe set and decoding)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from deployctl.outputgate.compare import Reference, Scored, TopK


def _top(raw: Any) -> tuple[TopK, ...]:
    return tuple(tuple((int(t), float(lp)) for t, lp in pos) for pos in raw)


@dataclass(frozen=True)
class ReferenceSet:
    key: str  # what must match for reuse (``reference_key``)
    probe_version: str
    refs: Mapping[str, Reference]
    failed: int = 0
    requests: int = 0
    seconds: float = 0.0
    reused_from: int | None = None  # the release that measured it, when reused
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # "scope", not "key", and "answer_ids": the ledger redacts the values of secret-looking names
        return {"scope": self.key, "probe_version": self.probe_version, "failed": self.failed,
                "requests": self.requests, "seconds": self.seconds,
                "refs": {i: {"prompt_ids": list(r.prompt_ids), "answer_ids": list(r.token_ids),
                             "logprobs": list(r.logprobs), "top": [list(map(list, p)) for p in r.top], "text": r.text}
                         for i, r in self.refs.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], reused_from: int | None = None) -> "ReferenceSet":
        refs = {i: Reference(i, tuple(r["prompt_ids"]), tuple(r["answer_ids"]), tuple(r["logprobs"]), _top(r["top"]),
                             r["text"]) for i, r in data["refs"].items()}
        return cls(data["scope"], data["probe_version"], refs, int(data.get("failed", 0)), int(data.get("requests", 0)),
                   float(data.get("seconds", 0.0)), reused_from)


def reference_key(*, unit_hash: str, host: str | None, sglang_version: str | None, gpu_model: str | None,
                  probe_version: str, max_new_tokens: int, top_k: int) -> str:
    return (f"unit={unit_hash};host={host};sglang={sglang_version};gpu={gpu_model};probes={probe_version};"
            f"new={max_new_tokens};k={top_k}")


@dataclass(frozen=True)
class Measured:
    """One pass over the probes on one server: its scores of the references and its greedy answers."""

    scores: Mapping[str, Scored]
    answers: Mapping[str, str]
    failed: int
    requests: int
    seconds: float


def scores_to_dict(scores: Mapping[str, Scored]) -> dict[str, Any]:
    return {i: {"logprobs": list(s.logprobs), "top": [list(map(list, p)) for p in s.top]} for i, s in scores.items()}


def scores_from_dict(data: Mapping[str, Any]) -> dict[str, Scored]:
    return {i: Scored(i, tuple(float(x) for x in s["logprobs"]), _top(s["top"])) for i, s in data.items()}

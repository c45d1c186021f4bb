"""The simulated model's answers: deterministic greedy text with log-probabilities, for the output gate.

A toy language model over a word tokenizer (one token per word or punctuation mark, as the rest of the
simulator counts): at every position the next-token distribution is a function of the whole context (a
rolling hash), so greedy decoding is deterministic and teacher forcing (prompt + an answer as input,
``logprob_start_len``) scores exactly what generation produced. The model "knows" the answers of the
shipped probe set (read by path from ``deployctl/outputgate/probes-v1.json``; the simulator imports
nothing of the controller), so it answers the arithmetic, word problems and facts correctly; other text
continues with filler words, about one position in seven a near tie between two words.

What changes its outputs (world.yaml ``outputs``):
- ``aa_noise`` (``SGLANG_SIM_OUTPUT_NOISE``): σ of a fresh random jitter of the logits on every request —
  two runs of the same server differ a little, as batch-size dependent GPU kernels make them;
- ``--kv-cache-dtype fp8_*``: a fixed, small logit error per (context, token): small KL, a few near ties
  flip, answers stay right;
- ``SGLANG_SIM_FAULT=wrong_sums`` or the patched SM120 fusion gate (``SGLANG_SIM_FORCE_AR_FUSION=1``): an
  all-reduce that races sums the wrong partials: numeric answers off, large logit errors (high KL);
- ``SGLANG_SIM_FAULT=garbage``: a broken backend — a flat distribution over junk tokens, at full speed.
"""

from __future__ import annotations

import json
import math
import random
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_PROBES = Path(__file__).resolve().parents[1] / "outputgate" / "probes-v1.json"
FILLER = ("the", "model", "answers", "with", "a", "steady", "stream", "of", "simulated", "tokens", "and", "then",
          "it", "was", "in", "that", "one", "day", "light", "water", "time", "over", "under", "small", "large",
          "house", "road", "quiet", "bright", "morning", ",", ".")
GARBAGE = ("\ufffd", "<unk>", "##", "ÿ", "@@", "\u200b", "]]", "%%")
_MASK = (1 << 61) - 1
_UNKNOWN_BASE = 500_000


@dataclass(frozen=True)
class Corruption:
    """How this server's outputs differ from the clean model."""

    aa_noise: float = 0.0      # σ of per-request random logit jitter
    model_error: float = 0.0   # σ of a fixed logit error per (context, token)
    wrong_sums: bool = False   # numeric answers come out wrong
    garbage: bool = False


def corruption(world: Mapping[str, Any], env: Mapping[str, str], server_args: Mapping[str, Any], arch: str,
               faults: frozenset[str]) -> Corruption:
    """This server's corruption from the world's ``outputs`` block, its flags, environment and faults."""
    w = world.get("outputs") or {}
    racing = env.get("SGLANG_SIM_FORCE_AR_FUSION", "0") == "1" and arch in w.get("force_ar_fusion_archs", ())
    return Corruption(
        aa_noise=float(env.get("SGLANG_SIM_OUTPUT_NOISE", w.get("aa_noise", 0.0))),
        model_error=float((w.get("kv_cache_dtype_error") or {}).get(str(server_args.get("kv_cache_dtype")), 0.0)),
        wrong_sums="wrong_sums" in faults or racing, garbage="garbage" in faults)


@dataclass(frozen=True)
class Step:
    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]


class Vocab:
    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        self.ids = {w: 1000 + i for i, w in enumerate(self.words)}

    def encode(self, text: str) -> list[int]:
        return [self.ids.get(t) or _UNKNOWN_BASE + zlib.crc32(t.encode()) % 1_000_000 for t in _TOKEN_RE.findall(text)]

    def piece(self, token: int) -> str:
        i = token - 1000
        word = self.words[i] if 0 <= i < len(self.words) else "<unk>"
        return word if not word[:1].isalnum() else " " + word

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(self.piece(t) for t in tokens)


@lru_cache(maxsize=1)
def _model() -> tuple[Vocab, dict[int, tuple[int, ...]]]:
    probes = json.loads(_PROBES.read_text())["probes"] if _PROBES.exists() else []
    words: set[str] = set(FILLER) | set(GARBAGE) | {str(i) for i in range(0, 2001)}
    for p in probes:
        words.update(_TOKEN_RE.findall(p["prompt"]))
        words.update(_TOKEN_RE.findall(p["answer"] or ""))
    vocab = Vocab(sorted(words))
    ends = {}
    for p in probes:
        if p["answer"] is not None:
            ends[_hash_all(vocab.encode(p["prompt"]))] = tuple(vocab.encode(p["answer"])) + (vocab.ids["."],)
    return vocab, ends


def vocab() -> Vocab:
    return _model()[0]


def _roll(h: int, token: int) -> int:
    return (h * 1_000_003 + token + 1) & _MASK


def _hash_all(tokens: Sequence[int]) -> int:
    h = 0
    for t in tokens:
        h = _roll(h, t)
    return h


def _mix(h: int) -> int:
    """splitmix64's finaliser: the rolling hash's low bits cycle, these do not."""
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
    h = (h ^ (h >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
    return h ^ (h >> 31)


def _unit(*parts: int) -> float:
    """A uniform number in (0, 1) fixed by its arguments."""
    return (zlib.crc32(repr(parts).encode()) + 0.5) / 2**32


def _gauss(*parts: int) -> float:
    return math.sqrt(-2 * math.log(_unit(*parts, 1))) * math.cos(2 * math.pi * _unit(*parts, 2))


class Context:
    """A growing token sequence with what the model needs at its end: the rolling hash and, when it
    continues a probe prompt, the probe's answer and how far into it the sequence is."""

    def __init__(self) -> None:
        self.h = 0
        self.n = 0
        self.answer: tuple[int, ...] | None = None
        self.offset = 0

    def push(self, token: int) -> None:
        self.h = _roll(self.h, token)
        self.n += 1
        self.offset += 1
        found = _model()[1].get(self.h)
        if found is not None:
            self.answer, self.offset = found, 0


def _distribution(ctx: Context, bad: Corruption, rng: random.Random) -> list[tuple[int, float]]:
    """(token, logit) of the listed tokens, then (-1, logit) for the rest of the vocabulary lumped together."""
    v = vocab()
    h = _mix(ctx.h)
    if bad.garbage:
        return [(v.ids[GARBAGE[(h + i) % len(GARBAGE)]], -0.05 * i + 0.3 * _gauss(h, i)) for i in range(6)] + [(-1, 1.5)]
    if ctx.answer is not None and ctx.offset < len(ctx.answer):
        greedy, margin = ctx.answer[ctx.offset], 4.0
        if bad.wrong_sums and v.words[greedy - 1000].isdigit():
            greedy = v.ids[str((int(v.words[greedy - 1000]) + 1 + h % 9) % 2001)]
    else:
        greedy = v.ids[FILLER[h % len(FILLER)]]
        u = _unit(h, 7)
        margin = 0.02 + 0.5 * u if u < 0.15 else 1.0 + 2.0 * u
    alts: list[int] = []
    i = 0
    while len(alts) < 6:
        cand = v.ids[FILLER[(h // 7 + 5 * i + 1) % len(FILLER)]]
        i += 1
        if cand != greedy and cand not in alts:
            alts.append(cand)
    listed = [(greedy, 0.0)] + [(t, -(margin + 0.7 * j + 0.2 * _unit(h, j))) for j, t in enumerate(alts)]
    rest = -(margin + 2.5)
    error = 1.5 if bad.wrong_sums else bad.model_error
    out = []
    for token, logit in listed:
        if error:
            logit += error * _gauss(h, token, 11)
        if bad.aa_noise:
            logit += rng.gauss(0.0, bad.aa_noise)
        out.append((token, logit))
    return out + [(-1, rest)]


def _step(ctx: Context, bad: Corruption, rng: random.Random, top_k: int, forced: int | None = None) -> Step:
    dist = _distribution(ctx, bad, rng)
    top = max(logit for _, logit in dist)
    z = top + math.log(sum(math.exp(logit - top) for _, logit in dist))
    listed = sorted(((t, l - z) for t, l in dist if t != -1), key=lambda x: -x[1])
    rest_lp = next(l for t, l in dist if t == -1) - z
    token = listed[0][0] if forced is None else forced
    lp = dict(listed).get(token, rest_lp - math.log(1000.0))  # an unlisted token: a thousandth of the rest
    return Step(token, lp, tuple(listed[:top_k]))


@dataclass(frozen=True)
class Completion:
    prompt_ids: tuple[int, ...]
    input_steps: tuple[Step | None, ...]  # from logprob_start_len on; None for the very first token
    output: tuple[Step, ...]
    text: str


def complete(prompt: str | Sequence[int], max_new_tokens: int, bad: Corruption, *, top_k: int = 0,
             logprob_start_len: int = -1, rng: random.Random | None = None) -> Completion:
    """Greedy decoding of ``max_new_tokens`` after the prompt, with the prompt's own token log-probabilities
    from ``logprob_start_len`` on (SGLang's meaning: -1, none)."""
    v = vocab()
    rng = rng or random.Random()
    ids = v.encode(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
    ctx = Context()
    inputs: list[Step | None] = []
    start = len(ids) if logprob_start_len < 0 else min(logprob_start_len, len(ids))
    for i, token in enumerate(ids):
        if i >= start:
            inputs.append(None if i == 0 else _step(ctx, bad, rng, top_k, forced=token))
        ctx.push(token)
    out = []
    for _ in range(max_new_tokens):
        s = _step(ctx, bad, rng, top_k)
        out.append(s)
        ctx.push(s.token)
    return Completion(tuple(ids), tuple(inputs), tuple(out), v.decode([s.token for s in out]))


def logprob_fields(c: Completion, top_k: int, with_text: bool) -> dict[str, Any]:
    """SGLang's ``meta_info`` log-probability fields: [logprob, token_id, text|None] triples, top-k lists."""
    v = vocab()

    def triple(lp: float | None, token: int) -> list[Any]:
        return [lp, token, v.piece(token) if with_text else None]

    fields: dict[str, Any] = {
        "input_token_logprobs": [triple(s.logprob if s else None, c.prompt_ids[len(c.prompt_ids) - len(c.input_steps) + i])
                                 for i, s in enumerate(c.input_steps)],
        "output_token_logprobs": [triple(s.logprob, s.token) for s in c.output],
    }
    if top_k > 0:
        fields["input_top_logprobs"] = [None if s is None else [triple(lp, t) for t, lp in s.top] for s in c.input_steps]
        fields["output_top_logprobs"] = [[triple(lp, t) for t, lp in s.top] for s in c.output]
    return fields

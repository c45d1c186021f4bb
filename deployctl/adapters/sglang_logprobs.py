"""SGLang's native ``/generate`` with log-probabilities, for the output gate: greedy answers with their
top-k distributions, and teacher-forced scoring of given tokens.

Request fields (``GenerateReqInput``, SGLang 0.4–0.5): ``text`` or ``input_ids``, ``sampling_params``
(``temperature: 0`` is greedy, ``max_new_tokens``), ``return_logprob``, ``logprob_start_len`` (the first
prompt position whose log-probability comes back), ``top_logprobs_num``. The response's ``meta_info``
carries ``input_token_logprobs`` / ``output_token_logprobs`` as ``[logprob, token_id, text|null]`` triples
and ``input_top_logprobs`` / ``output_top_logprobs`` as a list per position of such triples (``null`` at
the very first prompt token). Scoring a continuation = prompt + continuation as ``input_ids`` with
``logprob_start_len`` = the prompt's length, reading the input tokens' log-probabilities.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Sequence, TypeVar

import aiohttp

from deployctl.errors import DeployctlError
from deployctl.outputgate.compare import Reference, Scored, TopK
from deployctl.outputgate.probes import Probe

T = TypeVar("T")


class ProbeFailed(DeployctlError):
    pass


def _top(raw: Sequence[Any] | None) -> TopK:
    return tuple((int(t[1]), float(t[0])) for t in raw or () if t and t[0] is not None)


class LogprobClient:
    def __init__(self, session: aiohttp.ClientSession, url: str, *, api_key: str | None = None,
                 timeout_s: float = 120.0) -> None:
        self.session, self.url = session, url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def _generate(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            async with self.session.post(self.url + "/generate", json=body, headers=self.headers,
                                         timeout=self.timeout) as resp:
                if resp.status != 200:
                    raise ProbeFailed(f"/generate answered HTTP {resp.status}: {(await resp.text())[:200]}")
                data = await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise ProbeFailed(f"/generate failed: {exc!r}") from None
        if not isinstance(data, dict) or "meta_info" not in data:
            raise ProbeFailed("/generate answered without meta_info")
        return data

    async def greedy(self, probe: Probe, max_new_tokens: int, top_k: int) -> Reference:
        """The greedy answer with every step's top k; ``logprob_start_len=0`` returns the prompt's token ids."""
        data = await self._generate({
            "text": probe.prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens},
            "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": top_k})
        meta = data["meta_info"]
        out = meta.get("output_token_logprobs") or []
        tops = meta.get("output_top_logprobs") or []
        if len(tops) < len(out):
            raise ProbeFailed("/generate returned no top log-probabilities (top_logprobs_num is not supported)")
        return Reference(probe.id, tuple(int(t[1]) for t in meta.get("input_token_logprobs") or ()),
                         tuple(int(t[1]) for t in out), tuple(float(t[0]) for t in out),
                         tuple(_top(p) for p in tops[:len(out)]), str(data.get("text", "")))

    async def answer(self, probe: Probe, max_new_tokens: int) -> str:
        data = await self._generate({"text": probe.prompt,
                                     "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens}})
        return str(data.get("text", ""))

    async def score(self, ref: Reference, top_k: int) -> Scored:
        """This server's log-probabilities of the reference's tokens, each given the prompt and the tokens before."""
        data = await self._generate({
            "input_ids": list(ref.prompt_ids) + list(ref.token_ids),
            "sampling_params": {"temperature": 0, "max_new_tokens": 1},
            "return_logprob": True, "logprob_start_len": len(ref.prompt_ids), "top_logprobs_num": top_k})
        meta = data["meta_info"]
        lps = meta.get("input_token_logprobs") or []
        tops = meta.get("input_top_logprobs") or []
        n = len(ref.token_ids)
        lps, tops = lps[-n:] if n else [], tops[-n:] if n else []
        if len(lps) != n or any(t[0] is None for t in lps):
            raise ProbeFailed(f"/generate scored {len(lps)} of {n} tokens (logprob_start_len not honoured)")
        return Scored(ref.probe_id, tuple(float(t[0]) for t in lps), tuple(_top(p) for p in tops))


async def gather_limited(jobs: Sequence[Callable[[], Awaitable[T]]], concurrency: int
                         ) -> tuple[list[T | None], int, float]:
    """Runs the jobs ``concurrency`` at a time: results (None where one failed), failures, seconds."""
    gate = asyncio.Semaphore(concurrency)
    failed = 0
    t0 = time.monotonic()

    async def one(job: Callable[[], Awaitable[T]]) -> T | None:
        nonlocal failed
        async with gate:
            try:
                return await job()
            except ProbeFailed:
                failed += 1
                return None

    results = await asyncio.gather(*(one(j) for j in jobs))
    return list(results), failed, time.monotonic() - t0

"""The scheduler's serving lines on TP0: one `Prefill batch` per prefill step and one `Decode batch`
every decode_log_interval decode steps, in the version's format (world.yaml versions.*.*_line).

The prefill format is SGLang's (sglang-log-facts §6); the decode line follows the same fields as
SGLang's scheduler metrics mixin and is approximate for hybrid/speculative models.
"""

from __future__ import annotations

import time
from typing import Callable

from deployctl.sim.resolve import Resolved


class BatchLog:
    def __init__(self, resolved: Resolved, write: Callable[[int, str], None]) -> None:
        fmt = resolved.fmt
        self._prefill = fmt["prefill_line"]
        self._decode = fmt["decode_line"]
        self._hybrid = bool(resolved.model and resolved.model.get("hybrid_mamba"))
        self._spec = resolved.speculative
        self._graph = "True" if resolved.cuda_graph else "False"
        memory = resolved.memory
        self._kv = max(memory.kv_tokens if memory else 1, 1)
        self._mamba = max(memory.mamba_size if memory else 1, 1)
        self.interval = max(int(resolved.server_args.get("decode_log_interval") or 40), 1)
        self._write = write
        self._last = time.monotonic()
        self._generated = 0
        self._steps = 0
        self._request_steps = 0
        self._draft = resolved.draft_tokens

    def _usage(self, used: int, running: int, decode: bool) -> str:
        usage = used / self._kv
        if self._hybrid:
            head = f"#full token: {used}, " if decode else ""
            return f"{head}full token usage: {usage:.2f}, mamba usage: {running / self._mamba:.2f}"
        return f"#token: {used}, token usage: {usage:.2f}" if decode else f"token usage: {usage:.2f}"

    def prefill(self, seqs: int, tokens: int, running: int, queued: int, used: int, seconds: float,
                pending: int = 0) -> None:
        """``pending``: the waiting requests' prompt tokens (0.5.23's ``#pending-token``)."""
        tput = tokens / seconds if seconds > 0 else 0.0
        self._write(0, self._prefill.format(seqs=seqs, tokens=tokens, usage=self._usage(used, running, False),
                                            running=running, queued=queued, tput=tput, pending=pending))

    def tick(self, generated: int, running: int) -> bool:
        """Count one decode step; True when this step's line is due."""
        self._generated += generated
        self._request_steps += running
        self._steps += 1
        return self._steps % self.interval == 0

    def decode(self, running: int, queued: int, used: int) -> None:
        now = time.monotonic()
        elapsed, self._last = now - self._last, now
        tput = self._generated / elapsed if elapsed > 0 else 0.0
        accept = self._generated / max(self._request_steps, 1)
        self._generated = self._request_steps = 0
        rate = (accept - 1) / max(self._draft - 1, 1)
        spec = f"accept len: {accept:.2f}, accept rate: {rate:.2f}, " if self._spec else ""
        self._write(0, self._decode.format(running=running, token_usage=self._usage(used, running, True), spec=spec,
                                           cuda_graph=self._graph, tput=tput, queued=queued))

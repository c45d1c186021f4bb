"""The shipped probe set (``probes-v1.json``, written by scripts/gen_probes.py) and answer grading."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

Kind = Literal["math", "fact", "text", "chat"]
VERSION = "v1"
_FILE = Path(__file__).with_name(f"probes-{VERSION}.json")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass(frozen=True)
class Probe:
    id: str
    kind: Kind
    prompt: str
    answer: str | None  # None: nothing to check, only compared token by token

    @property
    def checkable(self) -> bool:
        return self.answer is not None


@dataclass(frozen=True)
class ProbeSet:
    version: str  # "v1+sha256:abcd1234…": recorded with every result; results of other versions never mix
    probes: tuple[Probe, ...]

    def subset(self, n: int | None) -> "ProbeSet":
        """The first ``n`` in a round-robin over the kinds: every kind in proportion, the same ones each run."""
        if n is None or n >= len(self.probes):
            return self
        by_kind: dict[str, list[Probe]] = {}
        for p in self.probes:
            by_kind.setdefault(p.kind, []).append(p)
        picked: list[Probe] = []
        while len(picked) < n:
            for group in by_kind.values():
                if group and len(picked) < n:
                    picked.append(group.pop(0))
        return ProbeSet(f"{self.version}[{n}]", tuple(picked))


@lru_cache(maxsize=1)
def shipped() -> ProbeSet:
    raw = _FILE.read_bytes()
    data = json.loads(raw)
    probes = tuple(Probe(p["id"], p["kind"], p["prompt"], p["answer"]) for p in data["probes"])
    return ProbeSet(f"{data['version']}+sha256:{hashlib.sha256(raw).hexdigest()[:12]}", probes)


def graded_answer(probe: Probe, text: str) -> str | None:
    """What the output answers: the first number for a numeric answer, else the first word; None if nothing."""
    assert probe.answer is not None
    pattern = _NUMBER if _NUMBER.fullmatch(probe.answer) else _WORD
    found = pattern.search(text)
    return found.group(0) if found else None


def correct(probe: Probe, text: str) -> bool:
    """The greedy output's answer equals the probe's (numbers as numbers, words case-insensitive)."""
    got = graded_answer(probe, text)
    if got is None or probe.answer is None:
        return False
    if _NUMBER.fullmatch(probe.answer):
        return float(got) == float(probe.answer)
    return got.lower() == probe.answer.lower()

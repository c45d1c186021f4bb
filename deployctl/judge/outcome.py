"""The judge's words for a verdict and for one level: shared by the judge, the promote machine and the
reports without loading the statistics (scipy) that reach them."""

from __future__ import annotations

from enum import Enum


class JudgeOutcome(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    INVALID = "INVALID"


class LevelState(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    UNKNOWN = "UNKNOWN"
    INVALID = "INVALID"

"""``deployctl judge``: replay a verdict from two stored benchmark results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from deployctl.bench.result import BenchResult
from deployctl.errors import ExitCode, InputError
from deployctl.inventory.marked_yaml import load_marked
from deployctl.inventory.policy import JudgePolicy
from deployctl.inventory.problems import InventoryInvalid, Problem
from deployctl.inventory.pydantic_problems import pydantic_problems
from deployctl.judge.outcome import JudgeOutcome


NAME = "judge"
HELP = "judge a candidate's benchmark against a baseline's (stored JSON), as promote would"
DESCRIPTION = """\
Compare two stored sweeps (the JSON of `deployctl bench --json`, or what the ledger kept) and print the
verdict promote would reach: per level the change of the metric with its confidence interval, the
limit, and PASS / FAIL / INCONCLUSIVE / INVALID, plus how many more candidate trials it would ask for.

The policy is the inventory's `policy.judge` block: pass a YAML or JSON file holding either that block
or a whole policy (with a `judge:` key). Without --policy the defaults apply (−5 %, 95 %, 2…5 trials).

example:
  deployctl judge baseline.json candidate.json
  deployctl judge baseline.json candidate.json --policy judge.yaml --json

exit status: 0 PASS · 10 FAIL · 11 INCONCLUSIVE or INVALID · 2 unreadable input
"""

_EXIT = {
    JudgeOutcome.PASS: ExitCode.OK,
    JudgeOutcome.FAIL: ExitCode.REJECTED,
    JudgeOutcome.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
    JudgeOutcome.INVALID: ExitCode.INCONCLUSIVE,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", type=Path, metavar="BASELINE.json", help="the baseline's benchmark result")
    parser.add_argument("candidate", type=Path, metavar="CANDIDATE.json", help="the candidate's benchmark result")
    parser.add_argument("--policy", type=Path, metavar="FILE", help="judge policy (YAML or JSON)")


def run(args: argparse.Namespace) -> int:
    # Here, not at the top: the verdict needs numpy and scipy, which `deployctl --help` would pay for (benchmarks/cli_startup.py).
    from deployctl.judge.verdict import judge, render_verdict

    baseline = _load_result(args.baseline)
    candidate = _load_result(args.candidate)
    policy = _load_policy(args.policy) if args.policy else JudgePolicy()
    verdict = judge(baseline, candidate, policy)
    if args.json:
        print(json.dumps(verdict.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(render_verdict(verdict))
    return _EXIT[verdict.outcome]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc


def _load_result(path: Path) -> BenchResult:
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or "levels" not in data:
        raise InputError(
            f"{path}: not a benchmark result (no 'levels')",
            hint="pass the output of `deployctl bench --json`",
        )
    try:
        return BenchResult.from_dict(data)
    except (TypeError, KeyError, AttributeError) as exc:
        raise InputError(f"{path}: malformed benchmark result: {exc}") from exc


def _load_policy(path: Path) -> JudgePolicy:
    try:
        marked = load_marked(_read(path))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InventoryInvalid(str(path), [Problem(str(path), mark.line + 1 if mark else 1, "(yaml)",
                                                   f"not valid YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not YAML/JSON: {exc}") from None
    data: Any = marked.data
    prefix: tuple[str, ...] = ()
    for key in ("policy", "judge"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data, prefix = data[key], (*prefix, key)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of judge settings")
    try:
        return JudgePolicy.model_validate(data)
    except ValidationError as exc:
        invalid = InventoryInvalid(str(path), pydantic_problems(exc, marked, str(path), JudgePolicy, prefix))
        invalid.hint = "fix the lines above (the keys are the inventory's policy.judge block), then judge again"
        raise invalid from None

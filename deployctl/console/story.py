"""A release's story as ``show`` and ``report`` tell it: read from the ledger, judged under the stored policy or,
with ``--recompute``, today's."""

from __future__ import annotations

import argparse

from deployctl.adapters.ledger import Ledger
from deployctl.console.inventory_args import inventory_path
from deployctl.decisions.records import Event, Release, StoredBench
from deployctl.errors import DeployctlError
from deployctl.inventory.policy import JudgePolicy
from deployctl.reporting.story import Story


def add_recompute_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recompute", action="store_true",
                        help="judge the stored trials again under today's inventory policy (marked RECOMPUTED) "
                             "instead of showing the verdict stored with the release")



def load_story(args: argparse.Namespace, ledger: Ledger, release: Release) -> tuple[Story, Release | None, list[Event], str]:
    """A release's story from the ledger (with the baseline it reused, if so), its known-good release, its
    events, and a line saying which judge policy a recomputation would run under (``--recompute``, or a
    release stored without its verdict)."""
    from deployctl.reporting.story import release_story

    benches = ledger.benches(release.id)
    events = ledger.events(release.id)
    known_good = ledger.get(release.previous_id) if release.previous_id else None
    reused = _reused_baseline(ledger, release, known_good, benches)
    policy, said = _judge_policy(args, release)
    story = release_story(release, benches, events, reused_baseline=reused, policy=policy, policy_said=said,
                          recompute=bool(getattr(args, "recompute", False)))
    return story, known_good, events, said



def _reused_baseline(ledger: Ledger, release: Release, known_good: Release | None,
                     benches: list[StoredBench]) -> StoredBench | None:
    candidate = next((b for b in benches if b.role == "candidate"), None)
    if known_good is None or candidate is None or any(b.role == "baseline" for b in benches):
        return None
    return ledger.baseline_before(unit_hash=known_good.unit_hash, bench_key=candidate.bench_key, before=candidate.at)



def _judge_policy(args: argparse.Namespace, release: Release) -> tuple[JudgePolicy, str]:
    """The deployment's judge policy from the inventory, or the default one, and a line that says which."""
    from deployctl.inventory.model import deployment_policy, load_inventory

    path = inventory_path(args)
    try:
        inv = load_inventory(path)
        policy = deployment_policy(inv, release.deployment).judge
    except (DeployctlError, OSError, KeyError, ValueError) as exc:
        reason = getattr(exc, "message", None) or str(exc)
        return JudgePolicy(), f"the default judge policy (the inventory {path} could not be used: {reason})"
    return policy, f"today's judge policy of {release.deployment} in {path}"

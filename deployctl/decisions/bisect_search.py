"""Which changes of a rejected candidate explain the rejection: the search, as a generator.

    search = Search(n=len(changes), candidate=observation_of_the_candidate)
    gen = search.run()
    test = next(gen)                  # a Trial: which subset of the changes to try on the live server
    test = gen.send(Observation(...)) # … until StopIteration carries the Finding

Pure: no I/O, no clock. The driver (``deployctl.flows.bisect``) turns each ``Trial`` into a trial of an
intermediate profile (the live profile plus the subset), judged with the promote's gates and judge.

What cuts the search, in order:
1. Startup facts. A candidate rejected by a startup gate names the facts that failed; the startup
   diff's catalogue links facts to the flags that can move them. Those changes are blamed without a
   benchmark (provisionally: if the survivors fail the same startup facts, the blame is withdrawn).
2. Priors. Changes pre-flight calls no-ops are tried first on the passing side.
3. Isolation (Zeller's dd): between a passing set P (the live profile) and a failing set F (the
   candidate), try P plus half the difference; each answer halves it: ⌈log2 n⌉ trials for one culprit.
4. Interactions. The isolated change is tried alone; if it passes, it needs something from P: isolate
   again with it fixed, until the group fails on its own. A group of more than one is an interaction.
Then the survivors (candidate minus every culprit) are promoted (``Trial.final``); if they fail, the
search goes on among them.

An INCONCLUSIVE trial is neither: the search never counts it as failed (that blamed harmless changes) nor
as passed. It tries the same subset again, up to ``remeasure`` times; still undecided, the search stops
with ``Finding.undecided`` naming the subset ("could not decide"), blaming nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Generator, Iterable

Subset = frozenset[int]


@dataclass(frozen=True)
class Trial:
    subset: Subset
    purpose: str
    final: bool = False  # the survivors: promoted through the normal loop, kept if they pass


@dataclass(frozen=True)
class Observation:
    passed: bool  # False for a failed trial and for an inconclusive one: read ``inconclusive`` first
    benchmarked: bool = True  # False: decided by the startup (gate or crash) without a benchmark
    # a startup-gate failure: the failed facts, and the changes of the subset the catalogue links to them
    startup_facts: frozenset[str] = frozenset()
    startup_blamed: Subset = frozenset()
    summary: str = ""
    inconclusive: bool = False  # the judge could not decide: neither passed nor failed

    @property
    def word(self) -> str:
        return "inconclusive" if self.inconclusive else "passes" if self.passed else "fails"


@dataclass(frozen=True)
class Culprit:
    changes: Subset
    how: str  # "startup facts" | "isolation" | "interaction"
    evidence: tuple[str, ...] = ()
    startup_facts: frozenset[str] = frozenset()  # the failed facts a "startup facts" blame rests on

    @property
    def interaction(self) -> bool:
        return len(self.changes) > 1


@dataclass(frozen=True)
class Finding:
    culprits: tuple[Culprit, ...]
    survivors: Subset
    survivors_passed: bool | None  # the final promote's answer; None when it was not run
    candidate_passed: bool = False  # the candidate itself passed: nothing to explain
    undecided: tuple[Subset, ...] = ()  # still inconclusive after every re-measurement: the search stopped


@dataclass
class Search:
    n: int
    candidate: Observation | None = None  # the candidate's rejection, when already known (promote --bisect)
    likely_harmless: Subset = frozenset()  # pre-flight says these are no-ops here
    remeasure: int = 2  # trials again of a subset found inconclusive, before the search gives up on it
    culprits: list[Culprit] = field(default_factory=list)
    tried: list[tuple[Trial, Observation]] = field(default_factory=list)
    _known: dict[Subset, Observation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.order = sorted(range(self.n), key=lambda i: (i not in self.likely_harmless, i))
        self._known[frozenset()] = Observation(True, benchmarked=False, summary="the live profile (the baseline)")
        if self.candidate is not None and not self.candidate.inconclusive:  # an undecided one is measured again
            self._known[frozenset(range(self.n))] = self.candidate

    def run(self) -> Generator[Trial, Observation, Finding]:
        try:
            return (yield from self._search())
        except _Undecided as undecided:
            return Finding(tuple(self.culprits), frozenset(), None, undecided=(undecided.subset,))

    def _search(self) -> Generator[Trial, Observation, Finding]:
        remaining: Subset = frozenset(range(self.n))
        provisional: Culprit | None = None
        trust_startup = True
        while remaining:
            if self.culprits:
                obs = yield from self._try(Trial(remaining, "the candidate minus the culprits", final=True))
            else:
                obs = yield from self._ask(remaining, "the candidate itself")
                if obs.passed:
                    return Finding((), remaining, True, candidate_passed=True)
            if obs.passed:
                return Finding(tuple(self.culprits), remaining, True)
            if provisional is not None and obs.startup_facts & provisional.startup_facts:
                # the survivors still fail the facts the catalogue blamed on them: the blame was wrong
                self.culprits.remove(provisional)
                remaining |= provisional.changes
                provisional, trust_startup = None, False
                continue
            provisional = None
            blamed = obs.startup_blamed & remaining
            if trust_startup and blamed and blamed != remaining:
                names = ", ".join(sorted(obs.startup_facts))
                provisional = Culprit(blamed, "startup facts", (
                    f"{obs.summary or 'startup gate failed'}; the startup catalogue links {names} to these changes "
                    "and to none of the others",), obs.startup_facts)
                self.culprits.append(provisional)
                remaining -= blamed
                continue
            group, evidence = yield from self._group(remaining)
            self.culprits.append(Culprit(group, "interaction" if len(group) > 1 else "isolation", evidence))
            remaining -= group
        return Finding(tuple(self.culprits), remaining, None)

    # --- isolation ---------------------------------------------------------------------------------

    def _group(self, failing: Subset) -> Generator[Trial, Observation, tuple[Subset, tuple[str, ...]]]:
        """The smallest group of ``failing`` found that fails on its own (one change, or an interaction)."""
        culprit, context = yield from self._isolate(frozenset(), failing)
        group: Subset = frozenset({culprit})
        evidence = [f"{self._names(group)} added to {self._names(context)} (which passes) fails" if context
                    else f"{self._names(group)} fails alone on the live profile"]
        while context:
            alone = yield from self._ask(group, f"does {self._names(group)} fail alone?")
            if not alone.passed:
                evidence.append(f"{self._names(group)} alone on the live profile fails too ({alone.summary})")
                break
            evidence.append(f"{self._names(group)} alone on the live profile passes: "
                            f"it needs something of {self._names(context)}")
            extra, wider = yield from self._isolate(group, group | context)
            group |= {extra}
            context = wider - group
        return group, tuple(evidence)

    def _isolate(self, passing: Subset, failing: Subset) -> Generator[Trial, Observation, tuple[int, Subset]]:
        """dd: one change c and a passing set P with P passing and P ∪ {c} failing (P ⊇ ``passing``)."""
        while len(failing - passing) > 1:
            delta = [i for i in self.order if i in failing - passing]
            probe = passing | frozenset(delta[: len(delta) // 2])
            obs = yield from self._ask(probe, f"is the culprit among {self._names(probe - passing)}?")
            if obs.passed:
                passing = probe
            else:
                failing = probe
        (culprit,) = failing - passing
        return culprit, passing

    def _ask(self, subset: Subset, purpose: str) -> Generator[Trial, Observation, Observation]:
        if subset in self._known:
            return self._known[subset]
        return (yield from self._try(Trial(subset, purpose)))

    def _try(self, test: Trial) -> Generator[Trial, Observation, Observation]:
        obs = yield test
        self.tried.append((test, obs))
        for again in range(1, self.remeasure + 1):
            if not obs.inconclusive:
                break
            retry = Trial(test.subset, f"re-measure ({again} of {self.remeasure}): {test.purpose}", final=test.final)
            obs = yield retry
            self.tried.append((retry, obs))
        if obs.inconclusive:
            raise _Undecided(test.subset)
        self._known[test.subset] = obs
        return obs

    @staticmethod
    def _names(subset: Iterable[int]) -> str:
        return "{" + ", ".join(f"#{i + 1}" for i in sorted(subset)) + "}"


class _Undecided(Exception):
    """A subset stayed inconclusive after every re-measurement: the search cannot go on without guessing."""

    def __init__(self, subset: Subset) -> None:
        super().__init__(subset)
        self.subset = subset


def worst_case_trials(n: int) -> int:
    """Trials to isolate one culprit among ``n`` changes and confirm it fails alone (not the final promote)."""
    return (math.ceil(math.log2(n)) if n > 1 else 0) + (1 if n > 1 else 0)

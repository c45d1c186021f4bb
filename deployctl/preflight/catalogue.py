"""The flag knowledge catalogue (``catalogue.yaml``): loading, validating, and matching it to a candidate.

The catalogue is data so that a new SGLang release is a YAML edit with its sources, not code. Matching is
pure: a :class:`Context` (SGLang version, compute capability, the flags as SGLang will see them, the
unit's environment) in, :class:`~deployctl.preflight.report.Finding` s out.
"""

from __future__ import annotations

import fnmatch
import string
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import yaml

from deployctl.preflight.flagtable import FlagTable
from deployctl.preflight.report import LEVELS, Finding, Level
from deployctl.preflight.versions import in_range, validate_range

_CONDITION_KEYS = {"flags", "arch", "arch_not", "env"}


@dataclass(frozen=True)
class Rule:
    id: str
    level: Level
    message: str
    source: str
    versions: str | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)
    arch: tuple[str, ...] | None = None
    arch_not: tuple[str, ...] | None = None
    env: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Replacement:
    flag: str
    versions: str | None
    instead: str | None  # the flag(s) to write instead; None: remove it
    note: str
    source: str


@dataclass(frozen=True)
class Catalogue:
    rules: tuple[Rule, ...]
    replacements: tuple[Replacement, ...]

    def replacement_for(self, flag: str, version: str | None) -> Replacement | None:
        """What replaced ``flag`` (no leading dashes) in ``version``, if the catalogue knows."""
        if version is None:
            return None
        return next((r for r in self.replacements if r.flag == flag and in_range(version, r.versions)), None)


class CatalogueInvalid(ValueError):
    pass


def parse_catalogue(text: str) -> Catalogue:
    """Parse and validate catalogue YAML; raises :class:`CatalogueInvalid` naming the entry at fault."""
    data = yaml.safe_load(text) or {}
    if data.get("schema_version") != 1:
        raise CatalogueInvalid("catalogue schema_version must be 1")
    rules = tuple(_rule(i, entry) for i, entry in enumerate(data.get("rules") or []))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise CatalogueInvalid(f"catalogue rule id {rule.id!r} is used twice")
        seen.add(rule.id)
    replacements = tuple(_replacement(i, entry) for i, entry in enumerate(data.get("replacements") or []))
    return Catalogue(rules, replacements)


def _rule(index: int, entry: dict[str, Any]) -> Rule:
    where = f"rules[{index}] ({entry.get('id', '?')})"
    for key in ("id", "level", "message", "source", "when"):
        if key not in entry:
            raise CatalogueInvalid(f"catalogue {where}: missing {key!r}")
    if entry["level"] not in LEVELS:
        raise CatalogueInvalid(f"catalogue {where}: level must be one of {', '.join(LEVELS)}")
    when = entry["when"] or {}
    unknown = set(when) - _CONDITION_KEYS
    if unknown:
        raise CatalogueInvalid(f"catalogue {where}: unknown condition(s) {sorted(unknown)}")
    _check_versions(where, entry.get("versions"))
    return Rule(
        id=entry["id"], level=entry["level"], message=" ".join(str(entry["message"]).split()),
        source=entry["source"], versions=entry.get("versions"), flags=dict(when.get("flags") or {}),
        arch=tuple(when["arch"]) if "arch" in when else None,
        arch_not=tuple(when["arch_not"]) if "arch_not" in when else None,
        env=dict(when.get("env") or {}),
    )


def _replacement(index: int, entry: dict[str, Any]) -> Replacement:
    where = f"replacements[{index}] ({entry.get('flag', '?')})"
    for key in ("flag", "note", "source"):
        if key not in entry:
            raise CatalogueInvalid(f"catalogue {where}: missing {key!r}")
    _check_versions(where, entry.get("versions"))
    return Replacement(entry["flag"], entry.get("versions"), entry.get("instead"), entry["note"], entry["source"])


def _check_versions(where: str, spec: str | None) -> None:
    if spec is None:
        return
    try:
        validate_range(spec)
    except ValueError as exc:
        raise CatalogueInvalid(f"catalogue {where}: {exc}") from None


@lru_cache(maxsize=1)
def shipped_catalogue() -> Catalogue:
    return parse_catalogue((resources.files(__package__) / "catalogue.yaml").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlagValues:
    """The flags as SGLang will see them, looked up the way argparse resolves them (aliases, prefixes)."""

    values: Mapping[str, Any]  # dest (or the flag name with underscores when no table) -> value
    table: FlagTable | None = None

    def key(self, name: str) -> str:
        spec = self.table.resolve("--" + name) if self.table is not None else None
        return spec.dest if spec is not None else name.replace("-", "_")

    def get(self, name: str) -> tuple[bool, Any]:
        key = self.key(name)
        if key not in self.values or self.values[key] is False or self.values[key] is None:
            return False, None
        return True, self.values[key]


@dataclass(frozen=True)
class Context:
    version: str | None
    arch: str | None  # "sm120"
    flags: FlagValues
    env: Mapping[str, str]


def _flag_matches(expected: Any, present: bool, value: Any) -> bool:
    if expected == "absent":
        return not present
    if not present:
        return False
    if expected is True:
        return True
    values = value if isinstance(value, (list, tuple)) else [value]
    if isinstance(expected, list):
        return any(str(v) in {str(e) for e in expected} for v in values)
    if isinstance(expected, dict):
        if "not" in expected:
            return not any(str(v) in {str(e) for e in expected["not"]} for v in values)
        if "gt" in expected:
            try:
                return float(values[0]) > float(expected["gt"])
            except (TypeError, ValueError):
                return False
    return str(value) == str(expected)


def _env_matches(expected: Any, env: Mapping[str, str], name: str) -> bool:
    if expected == "absent":
        return name not in env
    if expected == "present":
        return name in env
    if isinstance(expected, list):
        return env.get(name) in {str(e) for e in expected}
    return env.get(name) == str(expected)


def _arch_in(arch: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(arch.lower(), p.lower()) for p in patterns)


def rule_applies(rule: Rule, ctx: Context) -> bool:
    if rule.versions and (ctx.version is None or not in_range(ctx.version, rule.versions)):
        return False
    if (rule.arch is not None or rule.arch_not is not None) and ctx.arch is None:
        return False
    if rule.arch is not None and not _arch_in(ctx.arch or "", rule.arch):
        return False
    if rule.arch_not is not None and _arch_in(ctx.arch or "", rule.arch_not):
        return False
    if not all(_flag_matches(exp, *ctx.flags.get(name)) for name, exp in rule.flags.items()):
        return False
    return all(_env_matches(exp, ctx.env, name) for name, exp in rule.env.items())


class _MessageFields(dict):
    def __init__(self, ctx: Context) -> None:
        super().__init__(arch=(ctx.arch or "this GPU").upper(), version=ctx.version or "?")
        self.ctx = ctx

    def __missing__(self, key: str) -> str:
        if key.startswith("flag:"):
            present, value = self.ctx.flags.get(key[5:])
            if present:
                return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        return "{" + key + "}"


def _render(template: str, ctx: Context) -> str:
    fields = _MessageFields(ctx)
    # str.format would read "{flag:x}" as field "flag" with format spec "x": substitute by hand.
    out = []
    for literal, name, spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if name is not None:
            key = f"{name}:{spec}" if spec else name
            out.append(fields[key] if key in fields else fields.__missing__(key))
    return "".join(out)


def evaluate(catalogue: Catalogue, ctx: Context) -> list[Finding]:
    """Every catalogue rule that applies to the candidate, as findings citing their source."""
    return [
        Finding(rule.level, f"catalogue:{rule.id}", _render(rule.message, ctx), rule.source)
        for rule in catalogue.rules
        if rule_applies(rule, ctx)
    ]

"""The semantic difference of two resolved profiles: which flags and environment variables changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from deployctl.inventory.model import ResolvedProfile


@dataclass(frozen=True)
class ProfileDiff:
    flags_added: dict[str, Any] = field(default_factory=dict)
    flags_removed: dict[str, Any] = field(default_factory=dict)
    flags_changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name → (a, b)
    env_added: dict[str, str] = field(default_factory=dict)
    env_removed: dict[str, str] = field(default_factory=dict)
    env_changed: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.flags_added or self.flags_removed or self.flags_changed
                    or self.env_added or self.env_removed or self.env_changed)

    @property
    def changed_flags(self) -> set[str]:
        """Every flag name that differs in any way (added, removed or changed)."""
        return set(self.flags_added) | set(self.flags_removed) | set(self.flags_changed)

    @property
    def changed_env(self) -> set[str]:
        return set(self.env_added) | set(self.env_removed) | set(self.env_changed)


def diff_profiles(a: ResolvedProfile, b: ResolvedProfile) -> ProfileDiff:
    """What going from profile ``a`` to profile ``b`` changes (in ``b``'s flag order)."""
    flags = _diff(a.flags, b.flags)
    env = _diff(a.env, b.env)
    return ProfileDiff(*flags, *env)


def _diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[dict, dict, dict]:
    added = {k: v for k, v in b.items() if k not in a}
    removed = {k: v for k, v in a.items() if k not in b}
    changed = {k: (a[k], v) for k, v in b.items() if k in a and not _same(a[k], v)}
    return added, removed, changed


def _same(x: Any, y: Any) -> bool:
    # Types are part of the value: True (a bare switch) is not 1, 8 (checked int) is not 8.0.
    return type(x) is type(y) and x == y


def format_value(value: Any) -> str:
    """A flag value as it appears on the command line (``true`` → the bare switch)."""
    if value is True:
        return "(switch)"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def format_profile_diff(diff: ProfileDiff) -> list[str]:
    """Plain-text lines for a terminal or a cron mail: ``+`` added, ``-`` removed, ``~`` changed."""
    lines: list[str] = []
    for title, added, removed, changed, show in (
        ("flags", diff.flags_added, diff.flags_removed, diff.flags_changed, _flag),
        ("env", diff.env_added, diff.env_removed, diff.env_changed, _env),
    ):
        if not (added or removed or changed):
            continue
        lines.append(f"{title}:")
        lines += [f"  + {show(k, v)}" for k, v in added.items()]
        lines += [f"  - {show(k, v)}" for k, v in removed.items()]
        lines += [f"  ~ {show(k, old)}  ->  {format_value(new) if title == 'flags' else new}"
                  for k, (old, new) in changed.items()]
    return lines or ["no differences"]


def _flag(name: str, value: Any) -> str:
    return f"--{name}" if value is True else f"--{name} {format_value(value)}"


def _env(name: str, value: str) -> str:
    return f"{name}={value}"

"""What pre-flight found: findings with a level and the fact each one rests on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Level = Literal["ERROR", "WARN", "INFO"]
LEVELS: tuple[Level, ...] = ("ERROR", "WARN", "INFO")


@dataclass(frozen=True)
class Finding:
    """One check's result. ERROR: the server will not start (or the host cannot run it); WARN: the
    candidate pays a restart for something with no effect here, or has a side effect; INFO: never blocks."""

    level: Level
    code: str  # stable identifier, e.g. "flag-unknown", "catalogue:ar-fusion-no-effect", "host-gpu-count"
    message: str
    source: str  # the fact it rests on: a catalogue entry with SGLang file:line, the flag table, NVML…
    hint: str | None = None

    def one_line(self) -> str:
        """``LEVEL code: message (fix: …) [source: …]`` for logs, the ledger and promote's report."""
        fix = f" (fix: {self.hint})" if self.hint else ""
        return f"{self.level} {self.code}: {self.message}{fix} [source: {self.source}]"


@dataclass(frozen=True)
class PreflightReport:
    deployment: str
    profile: str
    findings: tuple[Finding, ...]
    sglang_version: str | None = None
    python: str | None = None
    flag_table: str | None = None  # how the flags were checked (the extraction method / shipped table)
    argv: tuple[str, ...] = field(default=())

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "ERROR"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "WARN"]

    @property
    def infos(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "INFO"]

    def refuses(self, strict: bool = False) -> bool:
        """The one rule of check, promote --dry-run and promote: an ERROR refuses, a WARN is shown and does
        not (``check --strict`` makes warnings refuse too, for a CI gate), an INFO never does."""
        return bool(self.errors) or (bool(self.warnings) and strict)

    def blocking(self, strict: bool = False) -> list[Finding]:
        """The findings that make :meth:`refuses` true (errors, plus warnings when strict)."""
        return self.errors + (self.warnings if strict else [])

    def summary(self) -> str:
        return f"{len(self.errors)} error(s), {len(self.warnings)} warning(s), {len(self.infos)} note(s)"

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape for ``deployctl check --json`` and the ledger."""
        return {
            "deployment": self.deployment,
            "profile": self.profile,
            "sglang_version": self.sglang_version,
            "python": self.python,
            "flag_table": self.flag_table,
            "argv": list(self.argv),
            "counts": {"error": len(self.errors), "warn": len(self.warnings), "info": len(self.infos)},
            "findings": [asdict(f) for f in self.findings],
        }


def sort_findings(findings: list[Finding]) -> tuple[Finding, ...]:
    """Worst first, otherwise in the order the checks produced them."""
    return tuple(sorted(findings, key=lambda f: LEVELS.index(f.level)))


def format_report(report: PreflightReport) -> str:
    where = f"SGLang {report.sglang_version}" if report.sglang_version else "SGLang version unknown"
    lines = [f"{report.deployment} ({report.profile} profile) · {where} · {report.python}"]
    for finding in report.findings:
        lines.append(f"{finding.level:<5} {finding.code}: {finding.message}")
        if finding.hint:
            lines.append(f"      fix: {finding.hint}")
        lines.append(f"      source: {finding.source}")
    lines.append(report.summary())
    return "\n".join(lines)

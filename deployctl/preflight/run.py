"""Pre-flight: everything knowable about a candidate before it costs a restart.

``run_preflight`` renders the candidate's command line exactly as the unit will run it, finds the SGLang
that command would start (the host's interpreter, or the simulator's version on a simulated host), checks
the flags the way SGLang's argparse will, matches the knowledge catalogue, and checks the host. The
verb ``deployctl check`` and promote's PREFLIGHT phase both call it.
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import socket
import sys
from dataclasses import dataclass
from typing import Callable, Mapping

from deployctl.errors import InputError
from deployctl.inventory.model import Inventory, resolve_profile
from deployctl.preflight.argcheck import (
    ArgProblem,
    PythonStyle,
    check_argv,
    parsed_values,
    render_error,
)
from deployctl.preflight.catalogue import (
    Catalogue,
    Context,
    FlagValues,
    evaluate,
    shipped_catalogue,
)
from deployctl.preflight.extract import extract_flag_table
from deployctl.preflight.flagtable import FlagTable, shipped_table, shipped_versions
from deployctl.preflight.hostcheck import (
    disk_findings,
    gpu_findings,
    path_findings,
    port_findings,
)
from deployctl.preflight.hostfacts import (
    STATE_PATHS,
    HostProbe,
    ProbeRequest,
    probe_local_host,
)
from deployctl.preflight.installed import InstalledSglang, probe_interpreter
from deployctl.preflight.report import Finding, PreflightReport, sort_findings
from deployctl.preflight.sources import DirSource
from deployctl.units.render import exec_argv, unit_environment

log = logging.getLogger("deployctl.preflight")

SIM_DEFAULT_VERSION = "0.5.10"  # contract §2: SGLANG_SIM_VERSION's default
InterpreterProbe = Callable[..., InstalledSglang]
TableLoader = Callable[[InstalledSglang], FlagTable]


def installed_flag_table(installed: InstalledSglang) -> FlagTable:
    """The default :data:`TableLoader`: extract the flags from the installed source (≈0.1–0.5 s)."""
    assert installed.source_root is not None
    return extract_flag_table(DirSource(installed.source_root), installed.sglang_version)


@dataclass(frozen=True)
class _Sglang:
    version: str | None
    table: FlagTable | None
    python_version: tuple[int, int, int] | None
    findings: tuple[Finding, ...]


def run_preflight(
    inv: Inventory,
    deployment: str,
    profile: str,
    *,
    host_probe: HostProbe = probe_local_host,
    interpreter_probe: InterpreterProbe = probe_interpreter,
    table_loader: TableLoader = installed_flag_table,
    default_python: str | None = None,
    catalogue: Catalogue | None = None,
) -> PreflightReport:
    """Check ``profile`` of ``deployment``. Findings, never an exception, for anything about the candidate;
    :class:`InputError` only for an unknown deployment/profile."""
    dep = inv.deployment(deployment)
    host = inv.hosts[dep.host]
    resolved = resolve_profile(inv, dep, profile)
    command = exec_argv(inv, dep, resolved, default_python=default_python or sys.executable)
    python, argv = command[0], command[4:]
    env = unit_environment(host, resolved)
    local = host.simulated or is_local_address(host.address)
    findings: list[Finding] = []

    if local:
        facts = host_probe(ProbeRequest(python=python, cuda_home=env.get("CUDA_HOME"), port=dep.port,
                                        unit=dep.unit, state_paths=STATE_PATHS))
        findings += path_findings(dep.host, python, facts, env.get("CUDA_HOME"), host.simulated)
        if not host.simulated:
            gpus = host.gpus
            findings += gpu_findings(dep.host, gpus.model, gpus.count, gpus.compute_capability, facts, env)
        findings += port_findings(dep.port, dep.unit, facts)
        findings += disk_findings(facts)
        python_runs = facts.python_executable
    else:
        python_runs = False
        findings.append(Finding(
            "WARN", "host-remote",
            f"host {dep.host} ({host.address}) is not this machine: its GPUs, port, disk and installed SGLang "
            "were not inspected, so the flags were checked against the catalogue only",
            "inventory hosts.{0}.address".format(dep.host), hint=f"run deployctl check on {host.address}"))

    sglang = _sglang_for(host.simulated, local and python_runs, python, env, interpreter_probe, table_loader)
    findings += sglang.findings
    style = PythonStyle(sglang.python_version or (3, 11, 0))
    cat = catalogue or shipped_catalogue()
    if sglang.table is not None:
        findings += flag_findings(sglang.table, argv, sglang.version, cat, style)
        findings += environment_findings(sglang.table, resolved.env)
        values = FlagValues(parsed_values(sglang.table, argv), sglang.table)
    else:
        findings += unshipped_flag_findings(list(resolved.flags))
        values = FlagValues({k.replace("-", "_"): v for k, v in resolved.flags.items()})
    findings += evaluate(cat, Context(sglang.version, host.gpus.compute_capability, values, env))
    return PreflightReport(
        deployment=dep.name, profile=profile, findings=sort_findings(findings), sglang_version=sglang.version,
        python=python, flag_table=sglang.table.method if sglang.table else None, argv=tuple(argv),
    )


def _sglang_for(simulated: bool, probe: bool, python: str, env: dict[str, str],
                interpreter_probe: InterpreterProbe, table_loader: TableLoader) -> _Sglang:
    if simulated:
        version = env.get("SGLANG_SIM_VERSION", SIM_DEFAULT_VERSION)
        table = shipped_table(version)
        if table is None:
            return _Sglang(version, None, None, (Finding(
                "WARN", "flags-unchecked",
                f"no flag table ships for simulated SGLang {version} (shipped: {', '.join(shipped_versions())}); "
                "the flags were not checked", "deployctl/preflight/flags-<version>.json"),))
        return _Sglang(table.sglang_version, table, None, ())
    if not probe:
        return _Sglang(None, None, None, ())
    try:
        installed = interpreter_probe(python, env)
    except InputError as exc:
        return _Sglang(None, None, None, (Finding("ERROR", "sglang-probe", exc.message, "the deployment's interpreter",
                                                  hint=exc.hint),))
    if installed.sglang_version is None:
        return _Sglang(None, None, installed.python_version, (Finding(
            "ERROR", "sglang-missing", f"SGLang is not installed for {python} (no sglang package metadata)",
            "importlib.metadata of the deployment's interpreter",
            hint=f"{python} -m pip install sglang==<version>, or point hosts.<host>.python at the SGLang venv"),))
    if installed.source_root is None:
        return _Sglang(installed.sglang_version, None, installed.python_version, (Finding(
            "WARN", "flags-unchecked", f"SGLang {installed.sglang_version} is installed for {python} but its "
            "source directory was not found; the flags were not checked", "importlib.util.find_spec('sglang')"),))
    try:
        table = table_loader(installed)
    except (InputError, SyntaxError) as exc:
        return _Sglang(installed.sglang_version, None, installed.python_version, (Finding(
            "WARN", "flags-unchecked", f"could not read the flags of SGLang {installed.sglang_version} at "
            f"{installed.source_root}: {exc}", "sglang/srt/server_args.py"),))
    log.info("SGLang %s at %s: %d flags", installed.sglang_version, installed.source_root, len(table.flags))
    return _Sglang(installed.sglang_version, table, installed.python_version, ())


def flag_findings(table: FlagTable, argv: list[str], version: str | None, catalogue: Catalogue,
                  style: PythonStyle = PythonStyle()) -> list[Finding]:
    """The argparse-equivalent check as findings, with the fix where the catalogue knows one."""
    out: list[Finding] = []
    label = f"SGLang {version or '?'}"
    source = f"flag table of {label} ({table.method})"
    for problem in check_argv(table, argv, style):
        quoted = f"`{render_error(table, problem)}`"
        if problem.kind == "deprecated":
            out.append(Finding("WARN", "flag-deprecated", f"{problem.option}: {problem.message}", source))
        elif problem.kind == "abbreviation":
            out.append(Finding("INFO", "flag-abbreviation", problem.message, source,
                               hint=f"write {problem.matches[0]}"))
        elif problem.kind in ("unknown", "ambiguous"):
            out.append(_unknown_finding(table, problem, quoted, label, source, version, catalogue))
        else:
            out.append(Finding("ERROR", f"flag-{problem.kind.replace('_', '-')}",
                               f"{problem.option}: {label} would refuse to start with {quoted}", source))
    return out


def unshipped_flag_findings(names: list[str]) -> list[Finding]:
    """Without the host's own flag table (its SGLang version unknown, a remote host): a flag that none of
    the shipped tables of the supported releases knows, not even as an abbreviation, is an error, as it
    is against the host's own table: a laptop's ``validate`` or ``check`` must not pass what SGLang refuses."""
    tables = [table for version in shipped_versions() if (table := shipped_table(version)) is not None]
    known = sorted({option for table in tables for option in table.option_strings})
    out = []
    for name in names:
        option = f"--{name}"
        if any(table.resolve(option) is not None or table.prefix_matches(option) for table in tables):
            continue
        close = close_options(option, known)
        versions = ", ".join(t.sglang_version for t in tables)
        out.append(Finding(
            "ERROR", "flag-unknown-everywhere",
            f"{option} is a flag of none of the SGLang releases deployctl supports ({versions}): SGLang "
            "would exit at startup with `unrecognized arguments`", "deployctl/preflight/flags-*.json",
            hint=f"did you mean {' or '.join(close)}?" if close else "check the spelling against "
                 "`python -m sglang.launch_server --help` on the host"))
    return out


# How alike a typo and a flag must be (difflib's ratio) to suggest the flag: 0.85 keeps a dropped or swapped
# letter or two (--tp-sze → --tp-size 0.94, --context-len → --context-length 0.90) and drops flags that only
# share the words around them (--enable-turbo-mode → --enable-ep-moe 0.77, --tp-sze → --pp-size 0.82).
CLOSE_FLAG = 0.85


def close_options(option: str, known: list[str]) -> list[str]:
    """The flags ``option`` is probably a misspelling of, closest first; none when nothing is close."""
    return difflib.get_close_matches(option, known, n=3, cutoff=CLOSE_FLAG)


def environment_findings(table: FlagTable, env: Mapping[str, str]) -> list[Finding]:
    """``SGLANG_*`` variables of the profile that this SGLang does not declare: a typo, or a variable from
    another release, does nothing, silently. (``SGLANG_SIM_*`` belong to deployctl's simulator.)"""
    if not table.environment:
        return []
    out = []
    for name in env:
        if not name.startswith(("SGLANG_", "SGL_")) or name.startswith("SGLANG_SIM_") or name in table.environment:
            continue
        close = difflib.get_close_matches(name, table.environment, n=2, cutoff=0.9)
        message = (f"{name} is not among the {len(table.environment)} variables SGLang {table.sglang_version} declares "
                   "in sglang/srt/environ.py, so it probably does nothing")
        if close:
            out.append(Finding("WARN", "env-unknown", message, "sglang/srt/environ.py (Envs) of the installed SGLang",
                               hint=f"did you mean {' or '.join(close)}?"))
        else:
            out.append(Finding("INFO", "env-unknown", message + " (unless read directly outside environ.py)",
                               "sglang/srt/environ.py (Envs) of the installed SGLang"))
    return out


def _unknown_finding(table: FlagTable, problem: ArgProblem, quoted: str, label: str, source: str,
                     version: str | None, catalogue: Catalogue) -> Finding:
    name = problem.option.lstrip("-")
    replacement = catalogue.replacement_for(name, version)
    what = "is ambiguous in" if problem.kind == "ambiguous" else "is not a flag of"
    code = "flag-ambiguous" if problem.kind == "ambiguous" else "flag-unknown"
    if replacement is not None:
        if problem.kind == "unknown" and replacement.note.startswith("renamed"):
            code = "flag-renamed"
        hint = f"use {replacement.instead}" if replacement.instead else f"remove {problem.option}"
        return Finding("ERROR", code, f"{problem.option} {what} {label} ({replacement.note}); {label} would exit "
                       f"with {quoted}", f"{source}; {replacement.source}", hint=hint)
    close = close_options(problem.option, table.option_strings)
    hint = f"did you mean {' or '.join(close)}?" if close else None
    return Finding("ERROR", code, f"{problem.option} {what} {label}; {label} would exit with {quoted}", source,
                   hint=hint)


def is_local_address(address: str) -> bool:
    """Whether the inventory's host address is this machine (no DNS: a name must be ours literally)."""
    if address in ("localhost", "local") or address in (socket.gethostname(), socket.gethostname().split(".")[0]):
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.is_loopback:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((str(ip), 0))  # only succeeds for an address configured on this machine
            return True
        except OSError:
            return False

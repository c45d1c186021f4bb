"""``python -m deployctl.install``: put an installed deployctl where the host looks for it.

scripts/install runs it with the interpreter of the venv it just installed the wheel into; everything
comes from that package: ``deployctl`` on PATH (a link in /usr/local/bin), the man page generated from
its parser (deployctl.manpage), shell completion for bash, zsh and fish (argcomplete), the units that run
deployctl unattended rendered with this venv's paths (deployctl.operations.canary_units), and, when the
inventory is there, the polkit rule for its units (``deployctl polkit-rule``). Nothing is enabled or
started: the operator decides that (``deployctl canary install``, ``systemctl start deployctl-promote@…``).
Idempotent: a second run rewrites the same files. ``--uninstall`` removes them again (and what ``canary
install`` added: timer drop-ins and links), ``--purge`` the ledger too; scripts/install --uninstall then
removes the venv. ``--share DIR`` writes only the man page and completions (share/ of the repository, which
the wheel carries as data files for pip and pipx users).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import argcomplete

from deployctl.console.options import DEFAULT_INVENTORY
from deployctl.inventory.model import load_inventory
from deployctl.inventory.policy import Policy
from deployctl.operations.canary_units import CANARY_SERVICE, CANARY_TIMER, PROMOTE_SERVICE, Paths, protect_home_for, unit_texts
from deployctl.manpage import manpage
from deployctl.units.polkit import polkit_rule

STATE_DIR = "/var/lib/deployctl"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# Under /usr/local/share: bash-completion, zsh's fpath and fish read it by default ($XDG_DATA_DIRS).
COMPLETIONS = {"bash": "bash-completion/completions/deployctl", "zsh": "zsh/site-functions/_deployctl",
               "fish": "fish/vendor_completions.d/deployctl.fish"}
MAN_PAGE = "man/man1/deployctl.1"
POLKIT_RULE = "50-deployctl.rules"


def _write(path: Path, text: str, mode: int = 0o644) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)
    return str(path)


def share_texts() -> dict[str, str]:
    """The man page and the completions, by their path under share/."""
    return {MAN_PAGE: manpage(),
            **{where: argcomplete.shellcode(["deployctl"], shell=shell) for shell, where in COMPLETIONS.items()}}


def install(prefix: Path, unit_dir: Path, polkit_dir: Path, inventory: Path) -> list[str]:
    """Write the files; what was written, in order."""
    written = []
    command = Path(sys.executable).parent / "deployctl"
    link = prefix / "bin" / "deployctl"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(command)
    written.append(f"{link} -> {command}")
    for where, text in share_texts().items():
        written.append(_write(prefix / "share" / where, text))
    for name, text in unit_texts(Policy(), _paths(inventory)).items():
        written.append(_write(unit_dir / name, text))
    if inventory.exists():
        inv = load_inventory(inventory)
        rule = polkit_rule(sorted({dep.unit for dep in inv.deployments.values()}))
        written.append(_write(polkit_dir / POLKIT_RULE, rule))
    return written


def uninstall(prefix: Path, unit_dir: Path, polkit_dir: Path, state_dir: Path | None) -> list[str]:
    """Remove what install() and ``deployctl canary install`` wrote (and ``state_dir``, the ledger, when
    given); what was removed, in order. The venv itself is scripts/install's: this runs from it."""
    found = [prefix / "bin" / "deployctl", *(prefix / "share" / where for where in (MAN_PAGE, *COMPLETIONS.values())),
             *(unit_dir / name for name in (CANARY_SERVICE, CANARY_TIMER, PROMOTE_SERVICE)),
             # canary install: a schedule drop-in of each timer instance, and the link that enables it
             *sorted(unit_dir.glob("deployctl-canary@*.timer.d")),
             *sorted(unit_dir.glob("*.wants/deployctl-canary@*.timer")),
             polkit_dir / POLKIT_RULE]
    if state_dir is not None:
        found.append(state_dir)
    removed = []
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_symlink() or path.exists():
            path.unlink()
        else:
            continue
        removed.append(str(path))
    return removed


def _paths(inventory: Path) -> Paths:
    return Paths(python=sys.executable, inventory=str(inventory), state_dir=STATE_DIR, textfile_dir=TEXTFILE_DIR,
                 protect_home=protect_home_for(sys.executable, str(inventory)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deployctl.install", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", type=Path, default=Path("/usr/local"), help="bin/, share/man, share/*completion*")
    parser.add_argument("--unit-dir", type=Path, default=Path("/etc/systemd/system"))
    parser.add_argument("--polkit-dir", type=Path, default=Path("/etc/polkit-1/rules.d"))
    parser.add_argument("--inventory", type=Path, default=Path(os.environ.get("DEPLOYCTL_INVENTORY", DEFAULT_INVENTORY)))
    parser.add_argument("--uninstall", action="store_true", help="remove what an install wrote (not the ledger)")
    parser.add_argument("--purge", action="store_true", help="with --uninstall: the ledger (--state-dir) too")
    parser.add_argument("--state-dir", type=Path, default=Path(STATE_DIR), help="the ledger's directory, for --purge")
    parser.add_argument("--share", type=Path, metavar="DIR",
                        help="only write the man page and completions under DIR (the repository's share/)")
    args = parser.parse_args(argv)
    if args.purge and not args.uninstall:
        parser.error("--purge goes with --uninstall")
    if args.share:
        for where, text in share_texts().items():
            _write(args.share / where, text)
        return 0
    if args.uninstall:
        for line in uninstall(args.prefix, args.unit_dir, args.polkit_dir, args.state_dir if args.purge else None):
            print(f"install: removed {line}")
        return 0
    for line in install(args.prefix, args.unit_dir, args.polkit_dir, args.inventory):
        print(f"install: {line}")
    if not args.inventory.exists():
        print(f"install: no {args.inventory} yet: write it, then `deployctl polkit-rule > {args.polkit_dir}/50-deployctl.rules`"
              " lets a group restart its units")
    return 0


if __name__ == "__main__":
    sys.exit(main())

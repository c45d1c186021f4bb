"""``python -m deployctl.install``: put an installed deployctl where the host looks for it.

scripts/install runs it with the interpreter of the venv it just installed the wheel into; everything
comes from that package: ``deployctl`` on PATH (a link in /usr/local/bin), the man page generated from
its parser (deployctl.manpage), shell completion for bash, zsh and fish (argcomplete), the units that run
deployctl unattended rendered with this venv's paths (deployctl.operations.canary_units), and, when the
inventory is there, the polkit rule for its units (``deployctl polkit-rule``). Nothing is enabled or
started: the operator decides that (``deployctl canary install``, ``systemctl start deployctl-promote@…``).
Idempotent: a second run rewrites the same files.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import argcomplete

from deployctl.console.options import DEFAULT_INVENTORY
from deployctl.inventory.model import load_inventory
from deployctl.inventory.policy import Policy
from deployctl.operations.canary_units import Paths, protect_home_for, unit_texts
from deployctl.manpage import manpage
from deployctl.units.polkit import polkit_rule

STATE_DIR = "/var/lib/deployctl"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# Under /usr/local/share: bash-completion, zsh's fpath and fish read it by default ($XDG_DATA_DIRS).
COMPLETIONS = {"bash": "bash-completion/completions/deployctl", "zsh": "zsh/site-functions/_deployctl",
               "fish": "fish/vendor_completions.d/deployctl.fish"}


def _write(path: Path, text: str, mode: int = 0o644) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)
    return str(path)


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
    written.append(_write(prefix / "share" / "man" / "man1" / "deployctl.1", manpage()))
    for shell, where in COMPLETIONS.items():
        written.append(_write(prefix / "share" / where, argcomplete.shellcode(["deployctl"], shell=shell)))
    paths = Paths(python=sys.executable, inventory=str(inventory), state_dir=STATE_DIR, textfile_dir=TEXTFILE_DIR,
                  protect_home=protect_home_for(sys.executable, str(inventory)))
    for name, text in unit_texts(Policy(), paths).items():
        written.append(_write(unit_dir / name, text))
    if inventory.exists():
        inv = load_inventory(inventory)
        rule = polkit_rule(sorted({dep.unit for dep in inv.deployments.values()}))
        written.append(_write(polkit_dir / "50-deployctl.rules", rule))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deployctl.install", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", type=Path, default=Path("/usr/local"), help="bin/, share/man, share/*completion*")
    parser.add_argument("--unit-dir", type=Path, default=Path("/etc/systemd/system"))
    parser.add_argument("--polkit-dir", type=Path, default=Path("/etc/polkit-1/rules.d"))
    parser.add_argument("--inventory", type=Path, default=Path(os.environ.get("DEPLOYCTL_INVENTORY", DEFAULT_INVENTORY)))
    args = parser.parse_args(argv)
    for line in install(args.prefix, args.unit_dir, args.polkit_dir, args.inventory):
        print(f"install: {line}")
    if not args.inventory.exists():
        print(f"install: no {args.inventory} yet: write it, then `deployctl polkit-rule > {args.polkit_dir}/50-deployctl.rules`"
              " lets a group restart its units")
    return 0


if __name__ == "__main__":
    sys.exit(main())

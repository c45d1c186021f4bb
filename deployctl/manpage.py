"""``python -m deployctl.manpage [FILE]``: deployctl(1), generated from the installed parser.

argparse-manpage writes NAME, SYNOPSIS, DESCRIPTION and every verb's options from the parser itself, so
the page never drifts from ``--help``; this module adds the sections man-pages(7) expects of a command:
EXIT STATUS (the one table, deployctl.errors.EXIT_CODES), ENVIRONMENT and FILES. scripts/install and
scripts/bootstrap run it on the host, from the package, so every install has a page that matches it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from argparse_manpage.manpage import Manpage

from deployctl import __version__
from deployctl.cli import COMMENTS, build_parser
from deployctl.errors import EXIT_CODES

ENVIRONMENT = (
    ("DEPLOYCTL_INVENTORY", "the inventory when -i is not given (default /etc/deployctl/inventory.yaml)"),
    ("DEPLOYCTL_STATE_DIR", "the ledger's directory when --state-dir is not given (default /var/lib/deployctl)"),
    ("DEPLOYCTL_TEXTFILE_DIR", "node_exporter's textfile directory: the canary's and promote's metrics go there"),
    ("DEPLOYCTL_REMOTE_COMMAND", "with -H: the host's deployctl (default deployctl; e.g. sudo deployctl)"),
    ("DEPLOYCTL_SSH_OPTIONS", "with -H: more options for ssh(1)"),
    ("DEPLOYCTL_LOCK_DIR", "the per-unit lock files (default /run/deployctl/locks)"),
    ("NO_COLOR", "no colour (also when stdout is not a terminal)"),
)
FILES = (
    ("/etc/deployctl/inventory.yaml", "the inventory: hosts, models, deployments and their profiles"),
    ("/var/lib/deployctl/ledger.sqlite3", "the ledger: every release, its unit, startup facts, samples, verdict"),
    ("/etc/systemd/system/sglang-DEPLOYMENT.service", "a deployment's unit (the known-good one after a rollback)"),
    ("/run/systemd/system.control/", "a candidate's trial unit: gone after a reboot, so the host comes back known-good"),
    ("/etc/systemd/system/deployctl-promote@.service", "run a promote as a service (scripts/install writes it)"),
    ("/etc/systemd/system/deployctl-canary@.service, .timer", "the scheduled canary (deployctl canary install)"),
    ("/etc/systemd/system/deployctl-canary@DEPLOYMENT.timer.d/schedule.conf",
     "a deployment's canary schedule (deployctl canary install --every)"),
    ("/etc/polkit-1/rules.d/50-deployctl.rules", "lets the group deployctl restart the inventory's units "
     "(deployctl polkit-rule; scripts/install creates the group: usermod -aG deployctl USER adds an operator)"),
    ("/opt/deployctl/venv/", "deployctl's own venv, made by scripts/install ($DEPLOYCTL_VENV); "
     "scripts/install --uninstall removes it and every file it wrote (the units, links, page, completion and rule), "
     "keeping /etc/deployctl and the ledger; --uninstall --purge removes the ledger and the group too"),
    ("/usr/local/bin/deployctl", "scripts/install's link to the venv's deployctl"),
    ("/usr/local/share/man/man1/deployctl.1", "this page (pip and pipx put it under their own share/man/man1)"),
    ("/usr/local/share/bash-completion/completions/deployctl", "bash completion (read through the bash-completion "
     "package, which scripts/install installs)"),
    ("/usr/local/share/zsh/site-functions/_deployctl, /usr/local/share/fish/vendor_completions.d/deployctl.fish",
     "zsh and fish completion"),
)


def _items(rows: tuple[tuple[str, str], ...]) -> str:
    return "\n".join(f".TP\n.B {name}\n{text}" for name, text in rows)


def manpage() -> str:
    page = Manpage(build_parser(), _data={
        "project_name": "deployctl", "version": __version__, "manual_title": "deployctl manual",
        "description": "promote SGLang configurations under systemd, keep them on evidence",
    })
    page.add_section("comments", "=", page.format_text(COMMENTS))
    page.add_section("exit status", "=", _items(tuple((str(code), text) for code, text in EXIT_CODES)))
    page.add_section("environment", "=", _items(ENVIRONMENT))
    page.add_section("files", "=", _items(FILES))
    return str(page)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = manpage()
    if args:
        Path(args[0]).parent.mkdir(parents=True, exist_ok=True)
        Path(args[0]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

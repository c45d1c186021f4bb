"""The ``deployctl`` command line: parse, dispatch to one verb module, apply the one error policy.

Each module in ``deployctl.commands`` is a verb. It defines ``NAME``, ``HELP`` (one line),
``DESCRIPTION`` (the ``--help`` text, with an example), ``add_arguments(parser)`` and
``run(args) -> int``. Adding a verb is adding a module; nothing here changes.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
import traceback
from types import ModuleType
from typing import Sequence

from deployctl import __version__, commands
from deployctl.errors import DeployctlError, ExitCode

log = logging.getLogger("deployctl")

EPILOG = """\
exit codes: 0 done · 1 bug · 2 bad input · 3 refused by preflight · 4 busy ·
            10 candidate rejected and rolled back · 11 inconclusive, baseline kept ·
            12 rollback failed (manual action needed) · 130 interrupted
            30 detached (goes on in its unit) · 31 operation killed without a result ·
            32 host unreachable · 33 SSH login refused · 34 incompatible or missing deployctl on the host
"""


def _verbs(only: str | None = None) -> list[ModuleType]:
    """The verb modules; with ``only``, just that one (module ``startup_report`` is verb ``startup-report``).

    Importing one verb instead of all keeps start-up fast (the judge pulls in scipy) and keeps a broken
    verb from taking the others down with it.
    """
    names = [info.name for info in pkgutil.iter_modules(commands.__path__)]
    if only is not None and only.replace("-", "_") in names:
        names = [only.replace("-", "_")]
    found = []
    for name in names:
        module = importlib.import_module(f"{commands.__name__}.{name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found.append(module)
    return sorted(found, key=lambda m: m.NAME)


def _requested_verb(argv: Sequence[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deployctl",
        description="Promote a new SGLang configuration under systemd; keep it only if the evidence says so.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"deployctl {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("-H", "--host", metavar="[USER@]HOST[:PORT]", default=None,
                        help="run the verb on that host over ssh, with this inventory (see README: from a laptop)")
    parser.add_argument("--remote-inventory", action="store_true", help="with -H: use the host's own inventory")
    parser.add_argument("--inventory-from", default=None, help=argparse.SUPPRESS)  # set by -H for the host's ledger
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for module in _verbs(_requested_verb(argv)):
        verb = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(verb)
        verb.set_defaults(_run=module.run)
    return parser


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    args._argv = argv
    if args.inventory_from:
        os.environ["DEPLOYCTL_INVENTORY_FROM"] = args.inventory_from
    if os.environ.get("DEPLOYCTL_OPERATION"):  # inside a transient unit (deployctl.live.operation)
        from deployctl.live.operation import run_as_worker

        return run_as_worker(lambda: _dispatch(args, argv))
    return _dispatch(args, argv)


def _dispatch(args: argparse.Namespace, argv: list[str]) -> int:
    """Run the verb (here, or on ``-H``'s host) under the one error policy."""
    try:
        if args.host:
            from deployctl.commands._remote import run_remote

            return run_remote(args.host, argv, args, remote_inventory=args.remote_inventory)
        return int(args._run(args))
    except DeployctlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `deployctl history | head` closed our stdout: not an error. Point stdout at devnull so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception:  # the bug path: keep the traceback for the report
        print("deployctl hit a bug; please report it with this traceback:", file=sys.stderr)
        traceback.print_exc()
        return ExitCode.BUG


if __name__ == "__main__":
    sys.exit(main())

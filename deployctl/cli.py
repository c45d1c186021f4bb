# PYTHON_ARGCOMPLETE_OK  (argcomplete's hook looks for this line in the entry point's module)
"""The ``deployctl`` command line: parse, dispatch to one verb module, apply the one error policy.

Each module in ``deployctl.commands`` is a verb. It defines ``NAME``, ``HELP`` (one line),
``DESCRIPTION`` (the ``--help`` text, with an example), ``add_arguments(parser)`` and
``run(args) -> int``. Adding a verb is adding a module; nothing here changes.

The global options (``deployctl.console.options``) are accepted before and after the verb. An expected
failure is ``error: …`` + ``hint: …`` on stderr, or with ``--json`` one JSON object on stdout
(``{"error", "hint", "exit_code"}``); only a bug prints a traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import logging
import os
import pkgutil
import shlex
import sys
import traceback
from types import ModuleType
from typing import NoReturn, Sequence

from deployctl import __version__, commands
from deployctl.console.upload import UPLOAD_OPTION, claim
from deployctl.console.options import add_global_options, finish_arguments
from deployctl.errors import DeployctlError, ExitCode, UsageError, exit_code_of, exit_codes_text

log = logging.getLogger("deployctl")

DESCRIPTION = "Promote a new SGLang configuration under systemd; keep it only if the evidence says so."
COMMENTS = """\
The deployment is named with -d/--deployment in every verb that takes one; where no other argument
is in the way, the first positional argument is accepted as an alias (`deployctl status glm5`).
Verbs that take a profile too read `VERB [DEPLOYMENT [PROFILE]]` (render, check, restart, promote,
bisect: `deployctl check glm5 candidate`), or -d and --profile; a lone word that is a profile, not a
deployment, is the profile (`deployctl promote candidate -d glm5`). A release is its id, or -d
DEPLOYMENT for the newest (`deployctl show -d glm5`). The default profile differs on purpose: render
shows baseline (what runs), check candidate (what you are about to try), restart the installed one's.
Global options (-i, --state-dir, -v, --json, --no-color) go before or after the verb; -H HOST goes
before it. `deployctl VERB --help` teaches each verb; `man deployctl` has ENVIRONMENT and FILES too.
"""
EPILOG = f"""\
{COMMENTS}
exit codes (every verb; the same in `man deployctl`, EXIT STATUS):
{exit_codes_text()}
"""
# The table is said once (the top help and the man page); each verb points there instead of repeating it.
VERB_EPILOG = "exit codes: `deployctl --help` or `man deployctl` (EXIT STATUS) lists them, the same for every verb"


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so a bad command line follows the one error policy."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, hint=self.format_usage().strip())


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


_VALUED = {"-i", "--inventory", "--state-dir", "-H", "--host", "--inventory-from"}  # global options that take a value


def _requested_verb(argv: Sequence[str]) -> str | None:
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The whole parser (every verb when ``argv`` names none): also what the man page is made from."""
    parser = Parser(prog="deployctl", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"deployctl {__version__}")
    add_global_options(parser, in_verb=False)
    _add_remote_options(parser)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True, parser_class=Parser)
    for module in _verbs(_requested_verb(argv)):
        verb = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=VERB_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(verb)
        add_global_options(verb, in_verb=True)
        verb.set_defaults(_run=module.run, _usage=verb.format_usage().strip())
    return parser


def _unknown_hint(unknown: list[str], args: argparse.Namespace) -> str:
    """-H and --remote-inventory are the top parser's (they decide where the verb runs): say where they go."""
    misplaced = [arg for arg in unknown if arg.split("=")[0] in ("-H", "--host", "--remote-inventory")]
    if misplaced:
        return (f"{misplaced[0].split('=')[0]} goes before the verb: deployctl -H [USER@]HOST {args.verb} …")
    return str(args._usage)


def _add_remote_options(parser: argparse.ArgumentParser) -> None:
    """``-H`` (before the verb): run it on a host over ssh (deployctl.console.remote)."""
    group = parser.add_argument_group("remote (before the verb)")
    group.add_argument("-H", "--host", metavar="[USER@]HOST[:PORT]", default=None,
                       help="run the verb on that host over ssh, with this inventory (README: from a laptop)")
    group.add_argument("--remote-inventory", action="store_true", help="with -H: use the host's own inventory")
    group.add_argument("--inventory-from", default=None, help=argparse.SUPPRESS)  # -H tells the host's ledger
    group.add_argument(UPLOAD_OPTION, action="store_true", help=argparse.SUPPRESS)  # -H: remove it when done


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _complete(parser: argparse.ArgumentParser) -> None:
    """Shell completion (argcomplete): a no-op unless the shell's completion hook called us."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


def _completion_argv(argv: list[str]) -> list[str]:
    """Under completion the words are in COMP_LINE, not argv: they pick the verb to load."""
    if "_ARGCOMPLETE" in os.environ:
        try:
            return shlex.split(os.environ.get("COMP_LINE", ""))[1:]
        except ValueError:
            return []
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("DEPLOYCTL_OPERATION"):  # inside a transient unit: the follower reads the exit code
        from deployctl.operations.operation import run_as_worker

        return run_as_worker(lambda: _main(argv))
    return _main(argv)


def _main(argv: list[str]) -> int:
    as_json = "--json" in argv
    upload = None
    if argv == ["--version"]:  # alone, it needs no verb: said before every verb's parser is loaded (0.5 s)
        print(f"deployctl {__version__}")
        return ExitCode.OK
    if as_json and "--version" in argv:  # argparse's version action prints text
        print(json.dumps({"version": __version__}))
        return ExitCode.OK
    try:
        parser = build_parser(_completion_argv(argv))
        _complete(parser)
        try:
            args, unknown = parser.parse_known_args(argv)
        except SystemExit as exc:  # --help, --version: argparse printed them
            _flush_stdout()
            return int(exc.code or 0)
        if unknown:  # the verb's usage, not the top parser's
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}", hint=_unknown_hint(unknown, args))
        as_json = bool(args.json)
        _configure_logging(args.verbose)
        if args.no_color:
            os.environ["NO_COLOR"] = "1"  # rich and use_colour() both honour it
        finish_arguments(args)
        args._argv = argv
        if args.inventory_from:
            os.environ["DEPLOYCTL_INVENTORY_FROM"] = args.inventory_from
        args.upload = upload = claim(args)
        if args.host:
            from deployctl.console.remote import run_remote

            code = run_remote(args.host, argv, args, remote_inventory=args.remote_inventory)
        else:
            code = int(args._run(args))
        _flush_stdout()
        return code
    except DeployctlError as exc:
        return _fail(exc.message, exc.hint, exit_code_of(exc), as_json and not exc.after_result)
    except BrokenPipeError:
        # `deployctl history | head` closed our stdout: not an error of ours.
        _silence_stdout()
        return ExitCode.OK
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            return _bug(as_json)
        # A full disk (stdout redirected to it, or the state directory) is the environment, not a bug.
        _silence_stdout()
        print(f"error: no space left on the device: {exc}", file=sys.stderr)
        return ExitCode.ENVIRONMENT
    except KeyboardInterrupt:
        return _fail("interrupted", None, ExitCode.INTERRUPTED, as_json)
    except Exception:  # the bug path: keep the traceback for the report
        return _bug(as_json)
    finally:
        if upload is not None:
            upload.remove()


def _fail(message: str, hint: str | None, code: int, as_json: bool) -> int:
    try:
        if as_json:
            # A message of several problems (validate, a bad inventory) is a summary line and one line each:
            # under --json they are a list, so a script need not split a string.
            first, *problems = message.splitlines() or [""]
            document: dict[str, object] = {"error": first, "hint": hint, "exit_code": code}
            if problems:
                document["problems"] = problems
            print(json.dumps(document, indent=2), flush=True)
        else:
            print(f"error: {message}", file=sys.stderr)
            if hint:
                print(f"hint: {hint}", file=sys.stderr)
    except OSError:  # stdout closed or full: the exit code still says it
        _silence_stdout()
    return code


def _bug(as_json: bool) -> int:
    print("deployctl hit a bug; please report it with this traceback:", file=sys.stderr)
    traceback.print_exc()
    if as_json:
        _fail("deployctl hit a bug (traceback on stderr)", "please report it with the traceback", ExitCode.BUG, True)
    return ExitCode.BUG


def _flush_stdout() -> None:
    sys.stdout.flush()  # inside the error policy: EPIPE/ENOSPC on the last write is handled, not a traceback


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())

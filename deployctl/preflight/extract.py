"""Rebuild SGLang's command-line flag table from its source, without importing sglang or torch.

Two generations of SGLang define their flags differently (``sglang-flag-facts.md`` §5):

* up to 0.5.11, ``ServerArgs.add_cli_args`` is a list of literal ``parser.add_argument("--x", …)``
  calls; choices are module-level lists, two come from parser registries (``DetectorMap``,
  ``ToolCallParserEnum``);
* from 0.5.23, ``ServerArgs`` is a ``msgspec.defstruct`` assembled from namespace Structs in
  ``arg_groups/fields/*.py`` whose fields are annotated ``A[T, "help"]`` or ``A[T, Arg(...)]``;
  ``arg_utils.add_cli_args_from_dataclass`` turns them into arguments (Literal → choices, bool →
  ``store_true``, ``List`` → ``nargs="+"``), and ``add_cli_args`` adds a handful by hand.

Both are read from the AST (``argspecs`` and ``fieldspecs``), names resolved statically by ``astnames``;
whatever cannot be resolved statically (choices added by plugins at run time) is recorded as
``choices_dynamic``.
"""

from __future__ import annotations

import ast

from deployctl.errors import InputError
from deployctl.preflight.argspecs import SERVER_ARGS, add_argument_specs, find_function, parser_settings
from deployctl.preflight.astnames import Modules
from deployctl.preflight.fieldspecs import namespace_fields, spec_from_field
from deployctl.preflight.flagtable import FlagSpec, FlagTable
from deployctl.preflight.sources import SourceTree

FIELDS_PACKAGE = "sglang/srt/arg_groups/fields"


def extract_flag_table(tree: SourceTree, version: str | None = None) -> FlagTable:
    """The flags ``python -m sglang.launch_server`` accepts, read from the SGLang source in ``tree``.

    Raises :class:`InputError` when the tree holds no ``sglang/srt/server_args.py``.
    """
    modules = Modules(tree)
    server_args = modules.require(SERVER_ARGS)
    function = find_function(server_args, "ServerArgs", "add_cli_args")
    if function is None:
        raise InputError(f"ServerArgs.add_cli_args not found in {tree.describe()}; this SGLang layout is not supported")
    annotated = tree.is_dir(FIELDS_PACKAGE)

    def expand() -> list[FlagSpec]:
        specs = (spec_from_field(modules, f) for f in namespace_fields(modules, server_args))
        return [s for s in specs if s is not None]

    specs = add_argument_specs(modules, function, SERVER_ARGS, expand)
    prog, allow_abbrev = parser_settings(server_args)
    help_flag = FlagSpec(("-h", "--help"), "help", "help", 0)
    method = ("annotated msgspec fields (arg_groups/fields) + add_cli_args" if annotated
              else "argparse add_argument calls in ServerArgs.add_cli_args")
    return FlagTable(version, prog, f"AST of {method}", (help_flag, *specs), allow_abbrev, _environment(modules))


def _environment(modules: Modules) -> tuple[str, ...]:
    """Names of the ``Envs`` descriptors in ``sglang/srt/environ.py`` (0.5.x), sorted; () if absent."""
    tree = modules.module("sglang.srt.environ")
    envs = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Envs"), None) if tree else None
    if envs is None:
        return ()
    return tuple(sorted(
        target.id for stmt in envs.body if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
        for target in stmt.targets if isinstance(target, ast.Name)
    ))


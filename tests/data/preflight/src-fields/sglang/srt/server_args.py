# A miniature of SGLang 0.5.23's server_args.py: a msgspec.defstruct assembled from namespace Structs
# whose annotated fields become flags, plus hand-registered arguments with computed choices.
import argparse

import msgspec
from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
from sglang.srt.arg_groups.fields.exec_ import ExecGraph
from sglang.srt.arg_groups.fields.model import Model


def _tool_call_parser_choices():
    module = sys.modules.get("sglang.srt.function_call.function_call_parser")
    if module is not None:
        return list(module.FunctionCallParser.ToolCallParserEnum)
    from sglang.srt.arg_groups.parser_names import TOOL_CALL_PARSER_NAMES

    return list(TOOL_CALL_PARSER_NAMES)


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        tool_call_parser_choices = _tool_call_parser_choices()
        parser.add_argument("--tool-call-parser", type=str, choices=["auto"] + tool_call_parser_choices)
        parser.add_argument(
            "--disable-cuda-graph",
            action=DeprecatedStoreTrueAction,
            new_flag="--cuda-graph-backend-decode=disabled",
        )
        parser.add_argument(
            "--enable-flashinfer-allreduce-fusion",
            action="store_true",
            help="(Deprecated: use --flashinfer-allreduce-fusion-backend=auto) Enable fusion.",
        )


class DeprecatedStoreTrueAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, nargs=0, const=True, default=False, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, **kwargs)


_INPUT_NAMESPACES = [Model, ExecGraph]
ServerArgs = msgspec.defstruct("ServerArgs", [])


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)

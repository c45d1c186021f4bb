# A miniature of SGLang <= 0.5.11's server_args.py: literal add_argument calls, module-level choice
# lists, a registry dict, a custom deprecated action and one runtime-computed choice list.
import argparse
from typing import List

from sglang.srt.parser.reasoning_parser import ReasoningParser

from .parser.names import NSA_CHOICES

ATTENTION_BACKEND_CHOICES = ["triton", "flashinfer", "fa3"]
SAMPLING_BACKEND_CHOICES = {"pytorch", "flashinfer"}


class ServerArgs:
    model_path: str
    tp_size: int = 1

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", "--model", type=str, required=True, help="weights")
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)
        parser.add_argument("--attention-backend", type=str, choices=ATTENTION_BACKEND_CHOICES)
        parser.add_argument("--nsa-decode-backend", choices=[*NSA_CHOICES, "trtllm"])
        parser.add_argument("--sampling-backend", choices=SAMPLING_BACKEND_CHOICES)
        reasoning_parser_choices = list(ReasoningParser.DetectorMap.keys())
        parser.add_argument("--reasoning-parser", choices=reasoning_parser_choices)
        parser.add_argument("--enable-thing", action=argparse.BooleanOptionalAction)
        parser.add_argument("--enable-old-thing", action=DeprecatedAction, help="Deprecated.")
        parser.add_argument("--page-size", type=int, choices=[16, 32, 64])
        parser.add_argument("--cuda-graph-bs", type=int, nargs="+")
        parser.add_argument("--disable-radix-cache", action="store_true")
        parser.add_argument("--plugin", choices=discover_plugins())


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)


def prepare_server_args(argv: List[str]):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)

"""What verbs share: the inventory the options point at, the deployment named, and plain output for
terminals and cron mail."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from deployctl.console.options import inventory_path, profile_for_lone_word
from deployctl.errors import InputError
from deployctl.inventory.model import Inventory, load_inventory


__all__ = ["deployment_name", "inventory_path", "load_inventory_from_args", "use_colour"]


def load_inventory_from_args(args: argparse.Namespace) -> Inventory:
    return load_inventory(inventory_path(args))


def deployment_name(inv: Inventory, args: argparse.Namespace) -> str:
    """The deployment named with -d (or its positional alias), else the inventory's only one."""
    profile_for_lone_word(args, inv.deployments)
    if args.deployment:
        return str(inv.deployment(args.deployment).name)
    if len(inv.deployments) != 1:
        known = ", ".join(inv.deployments) or "none"
        raise InputError(f"the inventory has {len(inv.deployments)} deployments: say which with -d ({known})")
    return next(iter(inv.deployments))


def use_colour(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (cron mail stays plain)."""
    return (stream or sys.stdout).isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"

"""What verbs share: where the inventory comes from, and plain output for terminals and cron mail."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from deployctl.inventory.model import Inventory, load_inventory

DEFAULT_INVENTORY = "/etc/deployctl/inventory.yaml"
INVENTORY_ENV = "DEPLOYCTL_INVENTORY"


def add_inventory_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i", "--inventory", metavar="FILE", default=None,
        help=f"inventory YAML (default: ${INVENTORY_ENV}, else {DEFAULT_INVENTORY})",
    )


def inventory_path(args: argparse.Namespace) -> str:
    """-i/--inventory, then $DEPLOYCTL_INVENTORY, then /etc/deployctl/inventory.yaml."""
    return getattr(args, "inventory", None) or os.environ.get(INVENTORY_ENV) or DEFAULT_INVENTORY


def load_inventory_from_args(args: argparse.Namespace) -> Inventory:
    return load_inventory(inventory_path(args))


def use_colour(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (cron mail stays plain)."""
    return (stream or sys.stdout).isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"

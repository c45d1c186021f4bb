"""Values that try to break out of a unit file's directives, and a one-deployment inventory carrying them
(shared by the escaping tests on data, under systemd-analyze, and under a real systemd)."""

from __future__ import annotations

import sys

import yaml

from deployctl.inventory.model import Inventory, parse_inventory

BASE = {
    "hosts": {"h": {"gpus": {"model": "M", "count": 1, "compute_capability": "sm120"}, "python": sys.executable}},
    "models": {"m": {"path": "org/model", "served_name": "served"}},
    "deployments": {"d": {"host": "h", "unit": "sglang-d.service", "port": 8000, "model": "m",
                          "profiles": {"baseline": {"flags": {}, "env": {}}}}},
}



def inventory_with(flags: dict | None = None, env: dict | None = None, served_name: str | None = None) -> Inventory:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    profile = data["deployments"]["d"]["profiles"]["baseline"]
    profile["flags"].update(flags or {})
    profile["env"].update(env or {})
    if served_name is not None:
        data["models"]["m"]["served_name"] = served_name
    return parse_inventory(yaml.safe_dump(data, allow_unicode=True))


HOSTILE = [
    'say "hi"', "back\\slash", "trailing\\", "$HOME", "${PATH}", "$$", "100%", "%n%h%%", "a b  c", "'single'",
    "semi;colon", " leading", "trailing ", "", "=", "--not-a-flag", "ü ∑ 🙂", "`cmd`", "$(rm -rf /)",
    "x ExecStartPre=/bin/rm -rf /", '\\"', "\\n", "#hash", "{braces}",
]

# -*- coding: utf-8 -*-
"""Run deployctl on the managed host and read its ``--json`` document and exit code.

The exit codes are deployctl's contract (``deployctl/errors.py`` ExitCode; tests/unit/test_ansible_contract.py
keeps these equal to it); the modules decide on them, never on the words of a message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex

OK = 0
PREFLIGHT_REFUSED = 3
BUSY = 4
REJECTED = 10
INCONCLUSIVE = 11
ROLLBACK_FAILED = 12
CANARY_DEGRADED = 20
CANARY_UNCLEAR = 23

# deployctl's own default (deployctl/adapters/ledger/location.py DEFAULT_STATE_DIR), after --state-dir and the
# variable; tests/unit/test_ansible_contract.py keeps the two equal.
DEFAULT_STATE_DIR = "/var/lib/deployctl"

# Options every module takes: where deployctl and its inventory and ledger are on the host.
COMMON_ARGS = dict(
    deployment=dict(type="str", required=True),
    executable=dict(type="str", default="deployctl"),
    inventory=dict(type="path"),
    state_dir=dict(type="path"),
)


def state_dir_of(params):
    """Where deployctl keeps its ledger on this host, resolved as deployctl resolves it."""
    return params.get("state_dir") or os.environ.get("DEPLOYCTL_STATE_DIR") or DEFAULT_STATE_DIR


def deployctl_argv(params, *args, **overrides):
    """The command line: the executable (may be ``python3 -m deployctl``), global options, the verb's."""
    params = dict(params, **overrides)
    argv = shlex.split(params["executable"])
    if params.get("inventory"):
        argv += ["--inventory", params["inventory"]]
    if params.get("state_dir"):
        argv += ["--state-dir", params["state_dir"]]
    return argv + list(args) + ["--json"]


def run_json(module, *args, **overrides):
    """``(rc, document, stderr)``: the document is deployctl's one JSON value on stdout, or None."""
    argv = deployctl_argv(module.params, *args, **overrides)
    rc, out, err = module.run_command(argv, check_rc=False, environ_update={"NO_COLOR": "1"})
    try:
        doc = json.loads(out) if out.strip() else None
    except ValueError:
        doc = None
    return rc, doc, err


def fail_with_error(module, rc, doc, err, what):
    """deployctl refused or failed: its own error and hint, its exit code, and what it said on stderr."""
    doc = doc if isinstance(doc, dict) else {}
    message = doc.get("error") or (err.strip().splitlines() or ["no output"])[-1]
    hint = doc.get("hint")
    module.fail_json(msg="%s: %s%s" % (what, message, " (%s)" % hint if hint else ""), rc=rc, exit_code=rc,
                     error=doc.get("error"), hint=hint, stderr=err)

#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: deployctl_watch
short_description: Watch the live release of an SGLang deployment once, as deployctl's canary does
description:
  - Runs C(deployctl canary -d DEPLOYMENT --json) on the managed host - health and a short benchmark of the
    live release judged against its own measurement at its promotion, stored in deployctl's ledger - and
    returns the watch's word. A fleet rollout runs it on the hosts of a batch after its bake time.
  - The outcome is read from deployctl's exit code - C(ok) (0), C(degraded) (20), C(unclear) (23, the
    evidence did not decide) - and the task does not fail on them; the play decides what a degraded or
    unclear watch does. Anything else (busy, bad input, a failed rollback) fails the task.
  - The canary also does what the host's policy.canary asks (a pending candidate, on_degraded), as its timer
    would; a host whose policy names the candidate being rolled out renders the live unit and tries nothing.
version_added: "0.2.0"
author: deployctl maintainers
extends_documentation_fragment:
  - deployctl.sglang.deployctl
attributes:
  check_mode:
    support: full
"""

EXAMPLES = r"""
- name: Watch the hosts this batch promoted
  deployctl.sglang.deployctl_watch:
    deployment: glm5
  register: watched
"""

RETURN = r"""
watch:
  description: C(ok), C(degraded) or C(unclear); C(planned) in check mode.
  type: str
  returned: always
lines:
  description: What the canary said, one line each.
  type: list
  elements: str
  returned: always
exit_code:
  description: deployctl's exit code.
  type: int
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.deployctl.sglang.plugins.module_utils.deployctl import (
    CANARY_DEGRADED, CANARY_UNCLEAR, COMMON_ARGS, OK, fail_with_error, run_json)

WORDS = {OK: "ok", CANARY_DEGRADED: "degraded", CANARY_UNCLEAR: "unclear"}


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS), supports_check_mode=True)
    if module.check_mode:
        module.exit_json(changed=False, watch="planned", lines=[], exit_code=OK)
    rc, doc, err = run_json(module, "canary", "-d", module.params["deployment"])
    if rc not in WORDS or not isinstance(doc, dict):
        fail_with_error(module, rc, doc, err, "deployctl canary")
    lines = [line for run in doc.get("runs", []) for line in run.get("lines", [])]
    module.exit_json(changed=False, watch=WORDS[rc], lines=lines, exit_code=rc)


if __name__ == "__main__":
    main()

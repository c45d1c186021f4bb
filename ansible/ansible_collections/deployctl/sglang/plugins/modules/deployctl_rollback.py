#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: deployctl_rollback
short_description: Roll an SGLang deployment back with deployctl on the host
description:
  - Runs C(deployctl rollback -d DEPLOYMENT --json) on the managed host; the unit of the release before the
    live one (or O(to), or O(to_unit_hash)) is installed and restarted, and the rollback is recorded in
    deployctl's ledger.
  - With a target (O(to) or O(to_unit_hash)) it is idempotent. When that unit runs already, nothing
    restarts and the task is not changed. A fleet rollout undoes a host by the unit hash it recorded
    before it started, so a second undo of the same host is a no-op, never a step further back.
  - C(changed) when a rollback ran; not changed when there was nothing to do.
  - Not run in check mode (deployctl has no dry run for rollback); Ansible skips the task.
version_added: "0.1.0"
author: deployctl maintainers
extends_documentation_fragment:
  - deployctl.sglang.deployctl
options:
  to:
    description: The release id to go back to (default the one before the live release).
    type: int
  to_unit_hash:
    description:
      - The sha256 of the unit to go back to (C(unit_hash) of C(deployctl_facts) before the rollout), or
        at least its first 12 hex digits. Mutually exclusive with O(to).
    type: str
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: Undo this rollout's promotion
  deployctl.sglang.deployctl_rollback:
    deployment: glm5

- name: Back to the unit the host ran before the rollout (a no-op when it runs it already)
  deployctl.sglang.deployctl_rollback:
    deployment: glm5
    to_unit_hash: "{{ fleet_before.unit_hash }}"
"""

RETURN = r"""
result:
  description: deployctl's result of the rollback (C(nothing) when there was nothing to roll back to).
  type: str
  returned: always
release:
  description: The rollback's release id in deployctl's ledger.
  type: int
  returned: when a rollback ran
reasons:
  description: What deployctl said, one line each.
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
    COMMON_ARGS, OK, fail_with_error, run_json)


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS, to=dict(type="int"), to_unit_hash=dict(type="str")),
                           mutually_exclusive=[("to", "to_unit_hash")], supports_check_mode=False)
    args = ["rollback", "-d", module.params["deployment"]]
    if module.params["to"] is not None:
        args += ["--to", str(module.params["to"])]
    if module.params["to_unit_hash"]:
        args += ["--to-unit-hash", module.params["to_unit_hash"]]
    rc, doc, err = run_json(module, *args)
    if not isinstance(doc, dict) or "result" not in doc:
        fail_with_error(module, rc, doc, err, "deployctl rollback")
    if doc["result"] == "nothing":
        module.exit_json(changed=False, result="nothing", reasons=doc.get("said", []), exit_code=rc)
    found = dict(result=doc["result"], release=doc.get("release"), reasons=doc.get("reasons", []), exit_code=rc)
    if rc != OK:
        module.fail_json(msg="rollback of %s: deployctl exit %d" % (module.params["deployment"], rc), stderr=err,
                         **found)
    module.exit_json(changed=True, **found)


if __name__ == "__main__":
    main()

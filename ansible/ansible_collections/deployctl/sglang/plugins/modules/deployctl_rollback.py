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
    live one (or O(to)) is installed and restarted, and the rollback is recorded in deployctl's ledger.
  - C(changed) when a rollback ran; not changed when the ledger has nothing to roll back to.
  - Not run in check mode (deployctl has no dry run for rollback); Ansible skips the task.
version_added: "0.1.0"
author: deployctl maintainers
extends_documentation_fragment:
  - deployctl.sglang.deployctl
options:
  to:
    description: The release id to go back to (default the one before the live release).
    type: int
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: Undo this rollout's promotion
  deployctl.sglang.deployctl_rollback:
    deployment: glm5
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
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS, to=dict(type="int")), supports_check_mode=False)
    args = ["rollback", "-d", module.params["deployment"]]
    if module.params["to"] is not None:
        args += ["--to", str(module.params["to"])]
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

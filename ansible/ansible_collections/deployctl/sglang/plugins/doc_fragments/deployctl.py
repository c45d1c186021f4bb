# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options every deployctl module takes: the deployment, and where deployctl and its files are."""

    DOCUMENTATION = r"""
options:
  deployment:
    description: The deployment, as named in deployctl's inventory on the host.
    type: str
    required: true
  executable:
    description: How to run deployctl on the host; may be a command line such as C(python3 -m deployctl).
    type: str
    default: deployctl
  inventory:
    description: >-
      deployctl's inventory on the host (default C($DEPLOYCTL_INVENTORY), then C(/etc/deployctl/inventory.yaml)).
    type: path
  state_dir:
    description: >-
      deployctl's state directory on the host (default C($DEPLOYCTL_STATE_DIR), then C(/var/lib/deployctl)).
    type: path
"""

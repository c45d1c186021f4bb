# -*- coding: utf-8 -*-
"""The rollout's shape as data: batch sizes like Argo Rollouts' steps, capped by a max-unavailable share."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible.errors import AnsibleFilterError


def _count(step, fleet_size, what):
    """A host count from ``3`` or ``"25%"`` (of the fleet, rounded up, at least 1)."""
    text = str(step).strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if not 0 < share <= 100:
                raise ValueError(text)
            return max(1, int(math.ceil(fleet_size * share / 100.0)))
        count = int(text)
        if count < 1:
            raise ValueError(text)
        return count
    except ValueError:
        raise AnsibleFilterError("%s: %r is not a host count (>= 1) or a percentage (0-100%%)" % (what, step))


def fleet_batches(steps, fleet_size, max_unavailable="100%"):
    """Ansible ``serial`` for the rollout: each step's size as a host count, none larger than the
    max-unavailable share of the fleet (a host restarting is unavailable); the last size repeats.

    ``fleet_batches([1, "25%", "50%"], 8, "25%")`` is ``[1, 2, 2]``.
    """
    if not isinstance(steps, (list, tuple)) or not steps:
        raise AnsibleFilterError("fleet_batches: %r is not a non-empty list of batch sizes" % (steps,))
    size = int(fleet_size)
    cap = _count(max_unavailable, size, "max_unavailable")
    return [min(_count(step, size, "fleet_batches"), cap) for step in steps]


class FilterModule(object):
    def filters(self):
        return {"fleet_batches": fleet_batches}

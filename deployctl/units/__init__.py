"""Unit files, pure: a deployment's systemd unit rendered from the inventory (``render``, Jinja2), its stamp and
state, profile diffs and the polkit rule. Used by promote, rollback, canary and ``render``/``diff``/``check``."""

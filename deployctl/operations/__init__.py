"""systemd operations on one deployment: ``site`` (where it runs: inventory, policy, URL, the systemd endpoint),
``restart`` (restart and decide whether it came up, fed by ``ready_wait``), long operations as transient units
(``operation``), the dead-man's timer (``dead_man``) and the units that run deployctl unattended
(``canary_units``). Used by every flow and by ``restart``, ``status``, ``attach``, ``startup-report``."""

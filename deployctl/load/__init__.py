"""Load generation and measurement: the benchmark sweep (``sweep``, one levels ``trial``), GPU/process
telemetry during it, ``measure`` (a sweep with telemetry, what ``bench`` and a promote run) and the passive
watch's /metrics window. Used by promote, canary, bisect (through the runner's bindings) and ``bench``."""

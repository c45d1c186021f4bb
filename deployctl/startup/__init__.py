"""A server start's facts, pure: the SGLang startup log parsed (``parser``, ``patterns``, ``tracebacks``), the
readiness decision (``readiness``), startup records, diffs and reports. Used by promote and ``restart`` (through
``deployctl.operations.restart``) and the ``startup-report``/``startup-diff`` verbs."""

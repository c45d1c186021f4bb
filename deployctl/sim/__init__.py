"""A stand-in for ``python -m sglang.launch_server`` that needs no GPU.

It accepts the same flags (per SGLang version), prints the same startup log, serves the same HTTP
API and produces throughput shaped by a calibrated model, so deployctl can be exercised end to end
under real systemd. It never imports anything from deployctl outside this package.
"""

"""Benchmark data, pure: the sweep's plan, streamed (SSE) responses, per-level results and metrics, the
table, telemetry summaries. Used by ``deployctl.load`` (which sends the load) and the judge."""

"""The alert rules and the canary's textfile, as Prometheus' own promtool reads them."""

from __future__ import annotations

import time
from pathlib import Path

from support.promtool import promtool

from deployctl.adapters import textfile

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"


def test_the_alert_rules_pass_promtool_check_rules():
    rules = sorted(MONITORING.glob("*.yaml")) + sorted(MONITORING.glob("*.yml"))
    assert rules
    done = promtool("check", "rules", *map(str, rules))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_canary_textfile_passes_promtool_check_metrics(tmp_path: Path):
    for outcome in textfile.OUTCOMES:
        metrics = textfile.CanaryMetrics("glm5-sim", outcome, time.time(), live_release=7, live_unit_hash="ab" * 32,
                                         tok_s={2: 120.5, 8: 410.0}, change_pct={8: -21.0}, degradations=2,
                                         rollbacks=1, degraded_rollbacks=1)
        path = textfile.write(tmp_path, metrics)
        done = promtool("check", "metrics", stdin=path.read_text())
        assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr

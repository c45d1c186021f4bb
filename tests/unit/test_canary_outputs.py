"""What the canary tells the outside, as data: metric names, the journal datagram, the webhook signature."""

from __future__ import annotations

import hmac
import json
import re
import struct
from pathlib import Path

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from deployctl.adapters.journal_send import encode
from deployctl.adapters.textfile import CanaryMetrics, registry_for
from deployctl.adapters.webhook import signature

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
# promtool's `check metrics` lint rules that apply here (Debian's prometheus package is too heavy for CI):
# valid names, snake case, counters end in _total and only counters do, a unit suffix in base units.
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_BAD_UNITS = ("_milliseconds", "_ms", "_kilobytes", "_minutes", "_hours", "_days", "_percent")


def _exposition() -> str:
    m = CanaryMetrics("glm5", "degraded", 1_800_000_000.0, live_release=4, live_unit_hash="ab" * 32,
                      tok_s={1: 50.0, 16: 700.0}, change_pct={1: -1.0, 16: -20.0}, degradations=3, rollbacks=1)
    return generate_latest(registry_for(m)).decode()


def test_metric_names_follow_prometheus_naming_rules():
    families = list(text_string_to_metric_families(_exposition()))
    assert families
    for family in families:
        for sample in family.samples:
            assert _NAME.match(sample.name), sample.name
            assert sample.name.startswith("deployctl_"), sample.name
            assert not sample.name.endswith(_BAD_UNITS), sample.name
            assert sample.name.endswith("_total") == (family.type == "counter"), sample.name
            assert not sample.name.endswith("_created"), sample.name
        assert family.documentation


def test_the_exposition_says_what_happened():
    text = _exposition()
    assert 'deployctl_canary_outcome{deployment="glm5",outcome="degraded"} 1.0' in text
    assert 'deployctl_canary_outcome{deployment="glm5",outcome="ok"} 0.0' in text
    assert 'deployctl_canary_change_ratio{concurrency="16",deployment="glm5"} -0.2' in text
    assert 'deployctl_canary_degradations_total{deployment="glm5"} 3.0' in text
    assert 'deployctl_canary_live_release_id{deployment="glm5"} 4.0' in text


def test_dashboard_and_alerts_use_only_metrics_the_canary_writes():
    written = {s.name for f in text_string_to_metric_families(_exposition()) for s in f.samples}
    used = set()
    for path in (MONITORING / "grafana-dashboard.json", MONITORING / "prometheus-alerts.yaml"):
        used |= set(re.findall(r"\bdeployctl_[a-z0-9_]+", path.read_text()))
    assert used and used <= written, used - written
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    assert all(t["expr"] for p in dashboard["panels"] for t in p["targets"])


def test_journal_fields_are_native_protocol_lines():
    data = encode({"MESSAGE": "glm5: degraded", "DEPLOYCTL_VERDICT": "degraded"})
    assert data == b"MESSAGE=glm5: degraded\nDEPLOYCTL_VERDICT=degraded\n"
    multi = encode({"MESSAGE": "a\nb"})
    assert multi == b"MESSAGE\n" + struct.pack("<Q", 3) + b"a\nb\n"


def test_webhook_signature_is_hmac_sha256_of_the_body():
    sig = signature(b"s3cret", b'{"text": "x"}')
    assert sig == "sha256=" + hmac.new(b"s3cret", b'{"text": "x"}', "sha256").hexdigest()

"""`deployctl report` of a real promote (the forced-fusion candidate on the sandboxed systemd), opened in
real headless Chromium: no console errors, every chart drawn, each from the release's own numbers.

Chromium is Debian's (`./scripts/bootstrap --with-browser`, which scripts/test and CI=true do).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from html import escape as html_escape
from pathlib import Path

import pytest
import yaml
from svgcheck import affine_residual, points, svgs
from support.promote_world import TWO_WAVES_POLICY, Cli, make_inventory

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult
from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

CHARTS = ("throughput", "latency", "per-request", "telemetry", "timeline")
# Written first into a copy of the page: any error (script, resource, console.error) lands in an attribute
# that --dump-dom shows. The product page has no script of its own.
CATCH = """<script>
(function () {
  var root = document.documentElement; root.setAttribute("data-listening", "yes");
  function note(text) { root.setAttribute("data-errors", (root.getAttribute("data-errors") || "") + "|" + text); }
  window.addEventListener("error", function (e) { note(e.message || (e.target && e.target.outerHTML) || "error"); }, true);
  var original = console.error; console.error = function () { note([].join.call(arguments, " ")); original.apply(console, arguments); };
})();
</script>"""

# A phone: the report in a 390 CSS px frame (headless Chromium keeps a window at least 500 px wide; a
# srcdoc frame shares the probe's origin, so its script can read the report's layout). It writes how
# wide the report lays out, the smallest chart text as drawn (CSS px: the SVG font size times the SVG's
# scale) and the right edge of the widest table box and figure box.
PHONE_WIDTH = 390
PHONE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="phone" width="{width}" height="844" style="border:0" srcdoc="{report}"></iframe>
<script>
document.getElementById("phone").addEventListener("load", function () {{
  var doc = this.contentDocument, least = 1e9, widest = 0;
  doc.querySelectorAll("svg text").forEach(function (t) {{
    var m = t.getScreenCTM(), size = parseFloat(getComputedStyle(t).fontSize) * Math.sqrt(m.a * m.a + m.b * m.b);
    if (t.textContent.trim()) least = Math.min(least, size);
  }});
  doc.querySelectorAll(".scroll, figure").forEach(function (box) {{ widest = Math.max(widest, box.getBoundingClientRect().right); }});
  var root = document.documentElement;
  root.setAttribute("data-page-width", doc.documentElement.scrollWidth);
  root.setAttribute("data-least-chart-px", least.toFixed(2));
  root.setAttribute("data-widest-box", widest.toFixed(0));
}});
</script></body></html>"""


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is missing: ./scripts/bootstrap --with-browser installs it")
        pytest.skip("chromium is not installed (./scripts/bootstrap --with-browser installs it)")
    return path


def _browser(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
             "--enable-logging=stderr", "--v=0"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


@dataclass(frozen=True)
class _Dom:
    stdout: str  # the DOM after load
    stderr: str
    root: str  # the <html> tag, where the catch writes


def _open(binary: str, root: Path, html: str) -> _Dom:
    probe = root / "probe.html"
    probe.write_text(html.replace("<head>", "<head>\n" + CATCH, 1))
    done = _browser(binary, root / "profile", "--dump-dom", probe.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return _Dom(done.stdout, done.stderr, re.search(r"<html[^>]*>", done.stdout).group(0))


@pytest.fixture(scope="module")
def promoted(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("report-e2e")
    data = make_inventory(root / "inventory.yaml", TWO_WAVES_POLICY)
    cli = Cli(sandbox, root / "inventory.yaml", root / "state")
    unit = data["deployments"]["glm5-sim"]["unit"]
    try:
        done = cli("restart", "glm5-sim", "--profile", "baseline")
        assert done.returncode == 0, done.stdout + done.stderr
        out = cli.json("promote", "candidate-forced-fusion", "-d", "glm5-sim", expect=ExitCode.REJECTED)
        assert out["verdict"] == "FAIL", out
        yield cli, out["release"], root
    finally:
        sandbox.run(["systemctl", "stop", unit])


def test_report_of_the_forced_fusion_promote_opens_in_chromium(promoted):
    cli, release_id, root = promoted
    binary = _chromium()
    target = root / "report.html"
    done = cli("report", str(release_id), "-o", str(target))
    assert done.returncode == 0, done.stdout + done.stderr
    html = target.read_text()
    assert len(html.encode()) < 1_000_000

    # The browser: no error of any kind, every chart drawn.
    dom = _open(binary, root, html)
    assert 'data-listening="yes"' in dom.root
    assert "data-errors" not in dom.root, dom.root
    assert "CONSOLE" not in dom.stderr, [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    # The same catch on a page with a missing image and a console error does see them.
    broken = _open(binary, root, html.replace("</body>", '<img src="missing.png"><script>console.error("x")</script></body>'))
    assert "missing.png" in broken.root and "|x" in broken.root, broken.root
    for key in CHARTS:
        figure = re.search(rf'<figure class="chart" id="chart-{key}".*?</figure>', dom.stdout, re.DOTALL)
        assert figure and "<svg" in figure.group(0), key
    assert len(svgs(dom.stdout)) == len(CHARTS)

    # On a phone: the page is no wider than the screen (tables and charts scroll in their own boxes), and
    # the smallest chart text is drawn at 11 CSS px or more.
    probe = root / "phone.html"
    probe.write_text(PHONE.format(width=PHONE_WIDTH, report=html_escape(html, quote=True)))
    phone = _browser(binary, root / "profile", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    measured = dict(re.findall(r'data-([a-z-]+)="([0-9.]+)"', re.search(r"<html[^>]*>", phone.stdout).group(0)))
    assert float(measured["page-width"]) <= PHONE_WIDTH, measured
    assert float(measured["widest-box"]) <= PHONE_WIDTH, measured
    assert float(measured["least-chart-px"]) >= 11, measured

    shot = root / "report.png"
    taken = _browser(binary, root / "profile", "--window-size=1100,3800", f"--screenshot={shot}", target.as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 50_000, taken.stderr[-2000:]
    print(f"screenshot: {shot}")

    # Drawn from the release's own numbers: every trial in the ledger is one point, placed by its value.
    with Ledger.open(cli.state_dir) as ledger:
        release = ledger.get(release_id)
        stored = {b.role: BenchResult.from_dict(b.result) for b in ledger.benches(release_id)}
    assert f"REJECTED: {release.reasons[0]}" in html
    for role in ("baseline", "candidate"):
        values = [t.output_tok_s for lv in stored[role].levels for t in lv.trials if t.valid]
        drawn = points(dom.stdout, f"trials-{role}")
        assert len(drawn) == len(values), role
        slope, worst = affine_residual(values, [y for _, y in drawn])
        assert slope < 0 and worst < 0.5, (role, worst)
    samples = len(stored["candidate"].telemetry_samples)
    assert samples > 0 and re.search(rf"<td>candidate</td><td>{samples}</td>", html)
    for c in (lv.concurrency for lv in stored["candidate"].levels):
        assert len(points(dom.stdout, f"interval-C{c}")) == 1


def test_markdown_table_of_the_same_release(promoted):
    cli, release_id, _ = promoted
    done = cli("report", str(release_id), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if re.match(r"\| \d+ \|", ln)]
    assert len(rows) == 2 and all(r.rstrip().endswith("| FAIL |") for r in rows)


def test_after_the_limit_changed_the_release_still_shows_the_verdict_it_had(promoted):
    """The forced-fusion promote was rejected at −87 % under a 10 % limit. With the inventory's limit now
    at 95 %, `show`, `report` and the markdown still show FAIL on every level, with the policy then in
    force; only `--recompute` judges again under today's policy, and says so. (The HTML page shows the same
story: tests/adapters/test_report_verb.py.)"""
    cli, release_id, root = promoted
    data = yaml.safe_load(cli.inventory.read_text())
    data["policy"]["judge"]["limit_pct"] = 95
    later = root / "inventory-later.yaml"
    later.write_text(yaml.safe_dump(data))
    shown = cli("show", str(release_id), "-i", str(later))
    assert shown.returncode == 0, shown.stderr
    rows = [ln for ln in shown.stdout.splitlines() if re.match(r"\s*\d+ \|", ln)]
    assert len(rows) == 2 and all(r.split("|")[-1].strip() == "FAIL" for r in rows), shown.stdout
    assert "verdicts as decided at the time" in shown.stdout and "limit −10 %" in shown.stdout
    md = cli("report", str(release_id), "--format", "markdown", "-i", str(later))
    rows = [ln for ln in md.stdout.splitlines() if re.match(r"\| \d+ \|", ln)]
    assert len(rows) == 2 and all(r.rstrip().endswith("| FAIL |") for r in rows), md.stdout
    again = cli("report", str(release_id), "--format", "markdown", "--recompute", "-i", str(later))
    rows = [ln for ln in again.stdout.splitlines() if re.match(r"\| \d+ \|", ln)]
    assert again.returncode == 0 and not any(r.rstrip().endswith("| FAIL |") for r in rows), again.stdout
    assert "RECOMPUTED (--recompute) under today's judge policy" in again.stdout and "decided FAIL" in again.stdout

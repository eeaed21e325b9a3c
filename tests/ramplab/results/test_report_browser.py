"""A real run's ``report.html`` in a real headless browser (Debian's chromium): it renders,
every chart holds plotly traces with points once the scripts ran, and nothing logs an error.
``ramplab report`` rebuilds the same report from the saved files."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.ramplab.results.test_charts import KEYS
from tests.support.cli import ramplab

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Before any other script: record uncaught errors and console.error calls.
CATCH = """<script>window.__errors=[];
window.addEventListener('error',function(e){window.__errors.push(String(e.message))});
(function(){var ce=console.error;console.error=function(){
window.__errors.push(Array.prototype.map.call(arguments,String).join(' '));
return ce.apply(console,arguments)}})();</script>"""
# After the page loaded and plotly drew: each chart's traces and their points, into the DOM.
PROBE = """<script>window.addEventListener('load',function(){setTimeout(function(){
var out=[];document.querySelectorAll('.plotly-graph-div').forEach(function(gd){
var traces=(gd.data||[]).map(function(t){var n=0,xs=t.x||[];for(var i=0;i<xs.length;i++){
if(xs[i]!==null&&xs[i]!==undefined){n++}}return n});
out.push({id:gd.id,drawn:gd.classList.contains('js-plotly-plot'),
svg:gd.querySelectorAll('.main-svg').length,traces:traces})});
var pre=document.createElement('pre');pre.id='ramplab-probe';
pre.textContent=JSON.stringify({charts:out,errors:window.__errors});
document.body.appendChild(pre)},0)});</script>"""


def render(page: Path, tmp: Path) -> tuple[dict[str, Any], str]:
    """The probe's findings and chromium's log, for ``page`` opened from disk."""
    text = page.read_text(encoding="utf-8")
    probed = tmp / "probed.html"
    probed.write_text(
        text.replace("<head>", "<head>" + CATCH, 1).replace("</body>", PROBE + "</body>", 1),
        encoding="utf-8",
    )
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr",
         "--v=0", "--virtual-time-budget=20000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r'<pre id="ramplab-probe">(.*?)</pre>', done.stdout, flags=re.DOTALL)
    assert found, "the probe never ran: " + done.stderr[-2000:]
    return json.loads(html.unescape(found.group(1))), done.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it "
                    "as root: SYSTEM_TOOLS in the Makefile)")  # fmt: skip
def test_a_real_report_renders_in_chromium_with_data_in_every_chart(
    report_run: Path, tmp_path: Path
) -> None:
    page = report_run / "report.html"
    text = page.read_text(encoding="utf-8")
    assert "<script src" not in text
    assert "<link" not in text  # opens offline: nothing to fetch
    probe, log = render(page, tmp_path)
    assert probe["errors"] == []
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if re.search(r"Uncaught|Error", line)], console
    charts = {c["id"]: c for c in probe["charts"]}
    assert sorted(charts) == sorted(f"chart-{key}" for key in KEYS)
    for chart_id, chart in charts.items():
        assert chart["drawn"], chart_id
        assert chart["svg"] >= 1, chart_id
        assert chart["traces"], chart_id
        assert sum(chart["traces"]) > 0, (chart_id, chart["traces"])


def test_the_real_run_has_retries_recommendations_and_every_percentile(report_run: Path) -> None:
    summary = json.loads((report_run / "summary.json").read_text(encoding="utf-8"))
    for p in (summary["ttft_ms"], summary["itl_ms"], summary["ttlt_ms"]):
        assert p["count"] > 0
        assert p["p50"] <= p["p90"] <= p["p95"] <= p["p99"] <= p["p999"] <= p["max"]
        assert p["min"] <= p["mean"] <= p["max"]
    assert summary["retry_amplification"] > 1.0  # the injected 429s were retried
    recs = json.loads((report_run / "recommendations.json").read_text(encoding="utf-8"))
    fired = {r["rule"] for r in recs["recommendations"]}
    assert "tail_sample_size" in fired  # a few seconds per step: p99 over < 100 requests
    assert "retry_after_ignored" not in fired  # the client honoured Retry-After
    md = (report_run / "report.md").read_text(encoding="utf-8")
    assert "## Where the time goes" in md
    assert "server: prefill" in md  # the target's phases joined with the client's


def test_report_rebuilds_every_file_from_the_saved_results(
    report_run: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(report_run, copy)
    for name in ("report.md", "report.html", "recommendations.json"):
        (copy / name).unlink()
    done = ramplab(["report", str(copy)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # Same run, same files: only the directory's name differs in the title.
    original = (report_run / "report.md").read_text(encoding="utf-8")
    rebuilt = (copy / "report.md").read_text(encoding="utf-8")
    assert rebuilt.replace("`copy`", "`run`", 1) == original
    assert (copy / "recommendations.json").read_bytes() == (
        report_run / "recommendations.json"
    ).read_bytes()
    assert (copy / "report.html").stat().st_size > 1_000_000

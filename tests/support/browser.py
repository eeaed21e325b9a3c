"""A report page opened in a real headless browser (Debian's chromium): what its scripts drew.

``render(page, tmp)`` loads a copy of the page with two scripts added — one first, recording
uncaught errors and ``console.error`` calls; one after load, writing each plotly chart's id,
whether it was drawn and its traces' point counts into the DOM — and returns those findings
with chromium's log. Shared by the run report's and the experiment report's browser tests.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = (
    "chromium is not installed (make test installs it as root: SYSTEM_TOOLS in the Makefile)"
)

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
var v=document.getElementById('verdict'),box=v?v.getBoundingClientRect():null;
pre.textContent=JSON.stringify({charts:out,errors:window.__errors,viewport:window.innerHeight,
verdict:box?{top:box.top,bottom:box.bottom,text:v.innerText}:null});
document.body.appendChild(pre)},0)});</script>"""


# The first viewport a reader sees: a laptop's browser window.
WINDOW = (1280, 800)


def render(page: Path, tmp: Path, screenshot: Path | None = None) -> tuple[dict[str, Any], str]:
    """The probe's findings (each chart's traces, the verdict block's place, the viewport's
    height) and chromium's log, for ``page`` opened from disk in a ``WINDOW``-sized window;
    with ``screenshot``, also a PNG of the first viewport of the page as it is."""
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
         "--v=0", f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=20000",
         "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    if screenshot is not None:
        shot = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", f"--user-data-dir={tmp / 'profile-shot'}",
             "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "--virtual-time-budget=20000", f"--screenshot={screenshot}", page.as_uri()],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert shot.returncode == 0, shot.stderr[-3000:]
    found = re.search(r'<pre id="ramplab-probe">(.*?)</pre>', done.stdout, flags=re.DOTALL)
    assert found, "the probe never ran: " + done.stderr[-2000:]
    return json.loads(html.unescape(found.group(1))), done.stderr


def console_errors(log: str) -> list[str]:
    """chromium's console lines that report an error."""
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    return [line for line in console if re.search(r"Uncaught|Error", line)]

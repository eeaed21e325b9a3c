"""The three variables every dashboard has, and the selectors they make."""

from __future__ import annotations

from ramplab.metrics.dashboards.model import Variable

LG = 'run=~"$run", scenario=~"$scenario", instance=~"$instance"'  # one worker or all of them
RS = 'run=~"$run", scenario=~"$scenario"'  # the master's gauges: one series per run

VARIABLES = (
    Variable("run", "run", "ramplab_requests_total"),
    Variable("scenario", "scenario", 'ramplab_requests_total{run=~"$run"}'),
    Variable("instance", "instance", f"ramplab_requests_total{{{RS}}}", include_all=True),
)

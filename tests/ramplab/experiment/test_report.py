"""The experiment's report on hand-made experiments: recommendations merged over repeats (a rule
that fired in some repeats only says so), the study section, ``comparison.json``'s
recommendations, and an experiment with no finished run. The real runs, the real rules and the
browser are in ``test_report_e2e.py``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Literal

import plotly.graph_objects as go
from rich.console import Console

from ramplab.experiment.recommendations import merge, read_recommendations
from ramplab.experiment.report import conclude
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.report.recommend import RECOMMENDATIONS_FILE, Recommendation
from ramplab.runs.manifest import Manifest
from ramplab.study.registry import analyse
from tests.ramplab.experiment.test_compare import write_experiment
from tests.support.cli import ramplab


def rec(
    rule: str,
    value: float,
    severity: Literal["act", "distrust", "note"] = "act",
    message: str = "",
) -> Recommendation:
    return Recommendation(rule, severity, message or f"{rule} at {value}", "figure", value, 0.2)


def put(run_dir: Path, *recs: Recommendation) -> None:
    data = {"recommendations": [r.to_json() for r in recs], "thresholds": {}, "rules": []}
    (run_dir / RECOMMENDATIONS_FILE).write_text(json.dumps(data), encoding="utf-8")


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_a_rule_that_fired_in_some_repeats_only_says_in_which() -> None:
    merged = merge(
        [[rec("signing_lock_wait", 0.4)], [], [rec("signing_lock_wait", 0.7, message="worst")]],
        [1, 2, 3],
    )
    (m,) = merged
    assert (m.fired, m.runs, m.everywhere) == (2, 3, False)
    assert m.values == (0.4, None, 0.7)
    assert m.where == "in 2 of 3 repeats: r1, r3 only"
    assert m.message == "worst"  # the sentence of the repeat where the figure was worst
    assert m.spread == "figure 0.4–0.7 over those repeats"
    assert m.to_json()["repeats"] == [{"repeat": 1, "value": 0.4}, {"repeat": 2, "value": None},
                                      {"repeat": 3, "value": 0.7}]  # fmt: skip


def test_merged_rules_keep_the_report_order_and_the_fewest_requests_is_the_worst() -> None:
    merged = merge(
        [
            [rec("tail_sample_size", 40, "note", "forty"), rec("errors", 0.1)],
            [
                rec("tail_sample_size", 12, "note", "twelve"),
                rec("generator_lateness", 30, "distrust"),
            ],
        ],
        [1, 2],
    )
    assert [m.rule for m in merged] == ["generator_lateness", "errors", "tail_sample_size"]
    assert merged[-1].message == "twelve"
    assert merged[-1].where == "in every repeat (2)"
    single = merge([[rec("errors", 0.1)]], [None])
    assert single[0].where == ""  # one run: nothing to say about repeats


def experiment(tmp_path: Path) -> Path:
    """Two variants of two repeats (hand-made summaries); the lock rule fired in one repeat of
    ``slow`` only; a study result with a table and a chart."""
    exp = write_experiment(tmp_path / "exp", {
        "fast": [[10.0, 20.0], [11.0, 21.0]],
        "slow": [[30.0, 60.0], [31.0, 62.0]],
    })  # fmt: skip
    put(exp / "01-fast-r1")
    put(exp / "02-fast-r2")
    put(exp / "03-slow-r1", rec("signing_lock_wait", 0.41, message="lock wait is 41 % of TTLT"))
    put(exp / "04-slow-r2")
    figure = go.Figure(go.Scatter(x=[5, 10], y=[1.0, 3.0], name="ratio"))
    figure.update_layout(title={"text": "slow ÷ fast"})
    StudyResult(
        "demo", "§0 A demo study", ["slow is 3.0× fast at 10 QPS (from comparison.json)"],
        tables=[StudyTable("ratios", ["QPS", "ratio"], [[5, 1.0], [10, 3.0]])],
        charts=[json.loads(figure.to_json())],
    ).write(exp)  # fmt: skip
    return exp


def test_the_report_shows_variants_study_recommendations_and_comparison(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    comparison = conclude(exp, Manifest.read(exp), quiet(), analyse)
    assert comparison is not None
    md = (exp / "report.md").read_text(encoding="utf-8")
    for heading in ("## Variants", "## Study: §0 A demo study", "## Recommendations",
                    "### slow", "## Comparison (baseline: fast)", "## Run order"):  # fmt: skip
        assert heading in md, heading
    assert "| fast * | x = fast | 2 of 2 |" in md
    assert "slow is 3.0× fast at 10 QPS" in md
    slow = md.split("### slow", 1)[1].split("##", 1)[0]
    assert "lock wait is 41 % of TTLT (`signing_lock_wait`; in 1 of 2 repeats: r1 only)" in slow
    fast = md.split("### fast", 1)[1].split("### slow", 1)[0]
    assert "No rule fired" in fast
    assert "**+190.5%!**" in md  # the comparison's delta beyond its noise
    page = (exp / "report.html").read_text(encoding="utf-8")
    assert page.count('<script type="text/javascript">') == 1  # plotly.js inlined once
    assert 'id="chart-study-1"' in page
    assert 'id="chart-throughput"' in page
    assert '<li class="act partial" data-rule="signing_lock_wait">' in page
    assert '<td class="worse">+190.5%!</td>' in page
    data = json.loads((exp / "comparison.json").read_text(encoding="utf-8"))
    recs = {v["name"]: v["recommendations"] for v in data["variants"]}
    assert recs["fast"] == []
    (lock,) = recs["slow"]
    assert (lock["rule"], lock["fired"], lock["runs"]) == ("signing_lock_wait", 1, 2)
    assert "in 1 of 2 repeats: r1 only" in (exp / "comparison.md").read_text(encoding="utf-8")


def test_ramplab_report_rebuilds_the_experiment_report(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    for name in ("report.md", "report.html", "comparison.json"):
        (exp / name).unlink(missing_ok=True)
    done = ramplab(["report", str(exp)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "report.md (and report.html)" in done.stdout
    assert (exp / "report.html").is_file()
    rebuilt = (exp / "report.md").read_text(encoding="utf-8")
    assert "## Study: §0 A demo study" in rebuilt
    # Each run's report was rebuilt first (its rules again, on its records): the experiment's
    # report is what those files say, and the same inputs give the same text.
    conclude(exp, Manifest.read(exp), quiet(), analyse)
    assert (exp / "report.md").read_text(encoding="utf-8") == rebuilt


def test_recommendations_are_computed_for_a_run_without_its_file(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", {"a": [[10.0, 20.0]]})
    run = exp / "01-a-r1"
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["steps"][1].update(errors={"503": 4}, error_ratio=0.4)
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    got = read_recommendations(run)
    assert not (run / RECOMMENDATIONS_FILE).exists()  # read, never written into the run
    (errors,) = [r for r in got if r.rule == "errors"]
    assert "errors are 40 % of requests at 10 QPS" in errors.message


def test_an_experiment_with_no_finished_run_still_gets_a_report(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", {"a": [[10.0, 20.0]], "b": [[10.0, 20.0]]},
                           status="interrupted")  # fmt: skip
    assert conclude(exp, Manifest.read(exp), quiet(), analyse) is None
    md = (exp / "report.md").read_text(encoding="utf-8")
    assert "No run finished: nothing to compare or recommend." in md
    assert "| 1 | 01-a-r1 | a | 1 | 1 | interrupted |" in md
    page = (exp / "report.html").read_text(encoding="utf-8")
    assert "Plotly.newPlot" not in page
    assert not (exp / "comparison.json").exists()

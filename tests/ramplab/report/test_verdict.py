"""The verdict on hand-built runs: the highest step meeting the SLO and the first miss, the
knee, the cause, the one trust status and the next action — and that every view (terminal,
report.md, report.html) states it first."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ramplab.report.charts import LabelledRun
from ramplab.report.html import write_html
from ramplab.report.markdown import RunMeta, render_markdown
from ramplab.report.recommend import recommend
from ramplab.report.run import WrittenReport, print_results
from ramplab.report.verdict import Verdict, judge
from ramplab.results.slo import RequestSlo
from ramplab.results.summary import RunSummary
from ramplab.results.trust import run_trust
from tests.ramplab.results.handmade import SERVER, Run, failed, full

SLO = RequestSlo(ttft_ms=50.0)


def verdict_of(run: Run, summary: RunSummary | None = None) -> Verdict:
    own, digest = run.evidence()
    summary = summary or own
    return judge(summary, digest, recommend(summary, digest))


def lock_bound() -> Run:
    """2 and 5 QPS meet a 50 ms TTFT; at 10 QPS every request waits 50 ms on the signing
    lock, so TTFT is 80 ms and the step misses."""
    locked = {**SERVER, "lock_wait": 50.0}
    slow = full(10, 2, ttft_ms=80.0, ttlt_ms=150.0, server_timing_ms=locked)
    return Run((2, 5, 10), [full(2, 0), full(5, 1), slow], slo=SLO)


def test_the_answer_is_the_last_meeting_step_and_the_first_miss_with_its_cause() -> None:
    verdict = verdict_of(lock_bound())
    assert verdict.slo == "ttft_ms ≤ 50 ms"
    assert [s.meets for s in verdict.steps] == [True, True, False]
    assert verdict.highest is not None
    assert verdict.highest.load == "5 QPS"
    assert verdict.first_miss is not None
    assert verdict.first_miss.load == "10 QPS"
    assert verdict.answer == (
        "meets ttft_ms ≤ 50 ms for ≥ 95% of requests up to 5 QPS (100.0%); misses at 10 QPS (0.0%)"
    )
    assert verdict.cause is not None
    assert verdict.cause.startswith("server: signing lock wait grew most")
    assert "0 → 50 ms from 2 QPS to 10 QPS" in verdict.cause
    # The one action: the first `act` rule's advice, the lock's here.
    assert verdict.action.endswith("(signing_lock_wait)")
    assert verdict.trust.level == "trusted"
    assert dict(verdict.lines())["trust"].startswith("trusted")


def test_a_run_that_never_breaks_says_the_limit_lies_beyond_the_ramp() -> None:
    verdict = verdict_of(Run((2, 5, 10), [full(2, 0), full(5, 1), full(10, 2)], slo=SLO))
    assert verdict.first_miss is None
    assert verdict.answer.endswith("up to 10 QPS (100.0%), the highest step: the limit lies "
                                   "beyond the ramp")  # fmt: skip
    assert verdict.action == "raise the ramp above 10 QPS to find where it breaks"
    assert verdict.knee.startswith("no latency knee within the ramp")


def test_a_step_meeting_again_above_a_miss_does_not_extend_the_answer() -> None:
    slow = full(5, 1, ttft_ms=55.0)  # TTFT p99 1.8× the lowest step's: no queueing knee
    verdict = verdict_of(Run((2, 5, 10), [full(2, 0), slow, full(10, 2)], slo=SLO))
    assert verdict.highest is not None
    assert verdict.highest.load == "2 QPS"
    assert verdict.first_miss is not None
    assert verdict.first_miss.load == "5 QPS"
    assert verdict.steps[2].meets  # shown per step, but capacity is where it first broke
    assert "ramplab search between 2 QPS and 5 QPS" in verdict.action


def test_without_an_slo_success_alone_is_judged_and_said_so() -> None:
    half = [*full(10, 1)[:50], *(failed(1, i, 100, 503) for i in range(50, 100))]
    verdict = verdict_of(Run((2, 10), [full(2, 0), half]))
    assert not verdict.slo_set
    assert verdict.slo == "success alone (no latency SLO set)"
    assert verdict.first_miss is not None
    assert verdict.first_miss.describe() == "10 QPS (50.0%)"
    assert verdict.cause == "errors at 10 QPS: 50.0% of requests failed (most: http_status)"
    assert verdict.answer.startswith("meets ≥ 95% of requests succeeding (no latency SLO set) "
                                     "up to 2 QPS")  # fmt: skip
    assert verdict.action.startswith("fix the errors first: at 10 QPS most requests failed")


def test_a_run_missing_from_its_lowest_step_says_so() -> None:
    verdict = verdict_of(Run((2, 5), [full(2, 0, ttft_ms=90.0), full(5, 1)], slo=SLO))
    assert verdict.highest is None
    assert verdict.answer.startswith("misses ttft_ms ≤ 50 ms for ≥ 95% of requests from the "
                                     "lowest step, 2 QPS (0.0%)")  # fmt: skip


def test_late_sends_over_enough_requests_put_the_run_under_caution() -> None:
    run = Run((2, 20), [full(2, 0), full(20, 1, lateness_ms=120.0)], slo=RequestSlo(ttft_ms=500))
    verdict = verdict_of(run)
    assert verdict.trust.level == "caution"
    assert [s.index for s in verdict.trust.flagged] == [1]
    assert "20 QPS: sent late: lateness p99 120 ms (limit 20 ms)" in verdict.trust_text
    assert verdict.first_miss is None  # caution: exact figures, the step still counts
    # The recommendation says the same thing, judged the same way.
    summary, digest = run.evidence()
    fired = {r.rule: r for r in recommend(summary, digest)}
    assert fired["generator_lateness"].steps == (1,)


def test_a_generator_bound_step_is_untrusted_and_ends_the_answer() -> None:
    run = Run((2, 5, 10), [full(2, 0), full(5, 1), full(10, 2)], slo=SLO)
    summary = run.summary()
    bound = summary.steps[2].model_copy(
        update={"generator_bound": True, "generator_reason": "worker w0: CPU 97% of a core"}
    )
    summary = summary.model_copy(update={"steps": (*summary.steps[:2], bound)})
    assert run_trust(summary).level == "untrusted"
    verdict = verdict_of(run, summary)
    assert verdict.highest is not None
    assert verdict.highest.load == "5 QPS"
    assert verdict.answer.endswith("; 10 QPS and above are untrusted")
    assert "generator-bound: worker w0: CPU 97% of a core" in verdict.trust_text
    assert verdict.action.startswith("give the generator more capacity")


def test_every_view_states_the_verdict_first(tmp_path: Path) -> None:
    run = lock_bound()
    summary, digest = run.evidence()
    recommendations = recommend(summary, digest)
    verdict = judge(summary, digest, recommendations)
    meta = RunMeta({"command": "ramplab run <x>.yaml", "target": "http://127.0.0.1:1"})

    markdown = render_markdown("r", meta, summary, digest, recommendations, (), verdict)
    assert markdown.index("## Verdict") < markdown.index("<details>") < markdown.index(
        "## Recommendations") < markdown.index("## Per step")  # fmt: skip
    assert "- **answer**: meets ttft_ms ≤ 50 ms" in markdown
    assert markdown.index("- target: `http://127.0.0.1:1`") > markdown.index("<details>")

    page = write_html(tmp_path / "report.html", LabelledRun("r", summary, digest), meta,
                      recommendations, (), verdict).read_text(encoding="utf-8")  # fmt: skip
    assert page.index('id="verdict"') < page.index("<details") < page.index('id="chart-')
    assert "ramplab run &lt;x&gt;.yaml" in page  # escaped, inside the folded run section

    out = io.StringIO()
    written = WrittenReport(tmp_path / "report.md", verdict, tuple(recommendations))
    print_results(summary, written, Console(file=out, width=240, color_system=None))
    printed = out.getvalue()
    assert printed.index("verdict") < printed.index("per-step summary")
    assert "act      lock wait is" in printed  # severity and first clause of each rule
    assert printed.rstrip().splitlines()[-1] == f"verdict: {verdict.headline}"

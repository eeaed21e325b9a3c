"""Failures grouped by kind (the errors column of the terminal and reports), the error ceiling."""

from __future__ import annotations

from ramplab.exitcodes import ExitCode
from ramplab.measure.record import RequestRecord
from ramplab.report.tables import rows
from ramplab.results.failures import ceiling_verdict, kinds_text, server_words, top_kinds
from ramplab.results.outcome import exit_code
from ramplab.results.producer import RunFacts, summarize
from tests.ramplab.results.handmade import rec

NOT_FOUND = (
    '{"error": {"message": "The model \'nosuch\' does not exist.", "type": "x", "code": 404}}'
)


def failed(
    i: int, n: int, status: int | None, kind: str, detail: str | None = None
) -> RequestRecord:
    return rec(0, i, n, ok=False, status=status, error_kind=kind, error_detail=detail)


def test_the_errors_column_groups_by_kind_with_the_statuses_inside_http_status() -> None:
    records = [
        failed(0, 6, 503, "http_status"),
        failed(1, 6, 503, "http_status"),
        failed(2, 6, 429, "http_status"),
        failed(3, 6, None, "timeout"),
        failed(4, 6, 200, "no_done"),
        rec(0, 5, 6),
    ]
    summary = summarize(records, RunFacts())
    cell = rows(summary)[0][5]
    assert cell == "http_status×3 (503×2, 429×1), no_done×1, timeout×1"
    assert "200×" not in cell  # a 200 with a broken stream is its kind, not a status


def test_kinds_text_of_no_errors_is_zero() -> None:
    assert kinds_text({}, {}) == "0"


def test_server_words_reads_an_openai_error_body() -> None:
    assert server_words(NOT_FOUND) == "The model 'nosuch' does not exist."
    assert server_words('{"detail": "Not Found"}') == "Not Found"
    assert server_words("upstream\n  timed out") == "upstream timed out"
    assert server_words(None) is None


def test_every_request_failed_passes_the_ceiling_with_the_servers_message() -> None:
    records = [failed(i, 11, 404, "http_status", NOT_FOUND) for i in range(11)]
    summary = summarize(records, RunFacts())
    assert ceiling_verdict(summary, 0.5) == "every request failed (11 of 11)"
    assert ceiling_verdict(summary, 1.0) == "every request failed (11 of 11)"
    assert top_kinds(records) == ["http_status×11 (404×11): The model 'nosuch' does not exist."]
    assert exit_code(summary, max_error_ratio=0.5) == ExitCode.SLO_MISSED
    assert exit_code(summary) == ExitCode.OK  # the master's own code: no ceiling there


def test_the_ceiling_is_a_ratio_over_the_records() -> None:
    records = [failed(i, 10, None, "timeout") for i in range(6)]
    records += [rec(0, i, 10) for i in range(6, 10)]
    summary = summarize(records, RunFacts())
    assert (
        ceiling_verdict(summary, 0.5) == "error ratio 0.60 > max_error_ratio 0.5 (6 of 10 failed)"
    )
    assert ceiling_verdict(summary, 0.6) is None
    assert exit_code(summary, max_error_ratio=0.6) == ExitCode.OK
    assert exit_code(summary, max_error_ratio=0.5) == ExitCode.SLO_MISSED

"""``ramplab search`` as a real process: bad input exits 2 naming the field; one whole search
against the reference target finds its computable capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ramplab.search.table import SEARCH_FILE
from tests.support.cli import ramplab
from tests.support.processes import REPO

EXAMPLE = REPO / "campaigns" / "search.yaml"


def write_campaign(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("changes", "args", "field"),
    [
        ({"search": {"goodput_min": 120}}, [], "search.goodput_min"),
        ({"search": {"start_qps": 100, "max_qps": 50}}, [], "search.start_qps"),
        ({"slo": None}, [], "slo"),
        ({}, ["--goodput-min", "120"], "--goodput-min"),
    ],
)
def test_bad_input_exits_2_naming_the_field(
    tmp_path: Path, changes: dict[str, object], args: list[str], field: str
) -> None:
    campaign = write_campaign(tmp_path, **changes)
    done = ramplab(["search", str(campaign), "--results-dir", str(tmp_path / "r"), *args],
                   timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"error: {field}:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


# One RS256 signature costs ~0.3 ms of a core (docs/target.md, "Response signing").
SIGN_S = 0.0003


def capacity_qps(data: dict[str, object]) -> float:
    """The reference target's capacity from the campaign's settings: the lower of its two
    serial sections — max_num_seqs sequences, each prefill + (max_tokens − 1) × ITL long (no
    jitter, no slowdown, ignore_eos), and the signing lock (``locked``, the default: one
    signature at a time, work_factor of them per response, so 1 / sign time)."""
    settings = data["target"]["settings"]  # type: ignore[index]
    latency, seqs = settings["latency"], settings["scheduler"]["max_num_seqs"]
    workload = data["workload"]  # type: ignore[index]
    prefill_ms = (
        latency["prefill_overhead_ms"] + workload["prompt_tokens"] * latency["prefill_per_token_ms"]
    )
    service_s = (prefill_ms + (workload["max_tokens"] - 1) * latency["itl_ms"]) / 1000.0
    signing = settings.get("signing") or {}
    bounds = [seqs / service_s]
    if signing.get("mode", "locked") == "locked":
        bounds.append(1.0 / (SIGN_S * signing.get("work_factor", 1)))
    return float(min(bounds))


@pytest.mark.timing  # asserts on measured time: run alone, after the rest
@pytest.mark.slow
def test_search_finds_the_targets_capacity(tmp_path: Path) -> None:
    # The shipped example, searched from closer by (the one override, to stay near a minute): from
    # 8 QPS, doubling, it probes 8, 16, 32, 24, 20, 18, 19 (seven runs, 14 s of hold at 8 QPS for
    # the plan's 112 arrivals); from 15, × 1.4, four: 15, 21, 18, then 19.5 ends it either way
    # (10 % of 18 or of 19.5). Everything else is the shipped file: the same target, SLO, decision
    # rule and resolution, a climb, a hopeless probe stopped early (21 QPS, over the capacity:
    # the queue grows by a request a second, TTFT by 50 ms a second, past the 100 ms SLO before
    # the 2 s warm-up ends) and a bisection.
    campaign = write_campaign(tmp_path, search={"start_qps": 15, "growth": 1.4})
    data = yaml.safe_load(campaign.read_text())
    capacity = capacity_qps(data)  # min(4 / 0.2 s, 1 / 0.3 ms) = 20 QPS
    results = tmp_path / "results"
    done = ramplab(["search", str(campaign), "--results-dir", str(results),
                    "--run-name", "s"], timeout=240)  # fmt: skip
    out = json.loads((results / "s" / SEARCH_FILE).read_text())
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    answer = out["answer"]
    assert answer["status"] == "found"
    high_pass, low_fail = answer["bracket"]
    # Constant arrivals and fixed service times: no queue below the capacity, a growing one
    # above it; the bracket is within the resolution and must straddle the capacity (10 %
    # either side for the client's and the scheduler's own overheads).
    assert high_pass <= capacity * 1.1
    assert low_fail >= capacity * 0.9
    assert low_fail - high_pass <= high_pass * data["search"]["resolution_pct"] / 100 + 1e-9
    assert answer["rate"] == high_pass
    passed = [p for p in out["probes"] if p["verdict"] == "pass" and p["rate"] == high_pass][-1]
    assert passed["test"]["arrivals"] >= out["plan"]["requests"] - 2  # the hold held the plan
    for probe in out["probes"]:
        counts = probe["counts"]  # every arrival of the hold accounted for
        if not probe["early_stop"]:
            assert counts["scheduled"] == counts["dispatched"] + counts["dropped"] + counts["lost"]
            assert counts["missing"] == 0, probe
            assert counts["unaccounted"] == 0, probe
        assert (results / "s" / probe["run_dir"] / "summary.json").is_file()
        assert probe["verdict"] in ("pass", "fail"), probe
        assert probe["generator_check"] == "cpu+lateness"
        assert probe["generator_cpu"], probe  # every probe sampled its worker
    assert any(p["early_stop"] for p in out["probes"]), "a hopeless probe was sat through"
    assert "max sustainable rate" in done.stdout
    markdown = (results / "s" / "search.md").read_text()
    assert "| 1 | probe | 15 |" in markdown
    assert "**bracket**" in markdown
    (results / "s" / "search.md").unlink()
    shown = ramplab(["report", str(results / "s")], timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "max sustainable rate" in shown.stdout
    assert (results / "s" / "search.md").read_text() == markdown  # rewritten the same
    assert (results / "s" / "search.html").is_file()

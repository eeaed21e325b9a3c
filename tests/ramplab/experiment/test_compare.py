"""Compare on hand-made run and experiment directories: alignment, noise, baseline, conditions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ramplab.campaign.fail_if import parse_conditions
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.compare import compare
from ramplab.experiment.render import markdown, write_comparison
from ramplab.experiment.sources import expand
from ramplab.load.shapes import parse_shape
from ramplab.results.producer import EngineCounts, RunFacts, summarize
from ramplab.results.summary import RunSummary
from ramplab.runs.manifest import Manifest, RunEntry, RunStatus, VariantEntry
from tests.support.cli import ramplab


def pct(p50: float, p99: float | None = None) -> dict[str, float | None]:
    return {"p50": p50, "p90": p50, "p99": p99 if p99 is not None else p50 * 2}


def step(qps: float, ttft: float, achieved: float | None = None) -> dict[str, Any]:
    return {"target_qps": qps, "achieved_qps": achieved if achieved is not None else qps,
            "goodput_qps": qps, "requests": 10, "errors": {}, "error_ratio": 0.0,
            "output_tokens_per_s": qps * 8, "ttft_ms": pct(ttft), "itl_ms": pct(2.0),
            "tpot_ms": pct(2.0), "ttlt_ms": pct(ttft + 20), "dropped": 0}  # fmt: skip


def write_run(path: Path, ttfts: list[float], rates: tuple[float, ...] = (5, 10)) -> Path:
    """A run directory whose ``summary.json`` is the producer's (every field a real run has),
    with the figures above put in."""
    path.mkdir(parents=True)
    shape = parse_shape("custom:" + ",".join(f"{q}@5s/1s" for q in rates))
    zeros = [0] * len(rates)
    base = summarize([], RunFacts(shape=shape, mode="open", scheduled=zeros,
                                  counts=EngineCounts(zeros, zeros))).to_json()  # fmt: skip
    steps = [{**s, **step(q, t)} for s, q, t in zip(base["steps"], rates, ttfts, strict=True)]
    summary = {**base, **step(sum(rates) / len(rates), sum(ttfts) / len(ttfts)), "steps": steps}
    RunSummary.from_json(summary).write(path / "summary.json")
    return path


def write_experiment(
    path: Path, runs: dict[str, list[list[float]]], status: RunStatus = "done"
) -> Path:
    entries, variants, index = [], [], 0
    for name, repeats in runs.items():
        variants.append(VariantEntry(name, name, {"x": name}))
        for r, ttfts in enumerate(repeats, 1):
            index += 1
            write_run(path / f"{index:02d}-{name}-r{r}", ttfts)
            entries.append(RunEntry(index, name, r, r, f"{index:02d}-{name}-r{r}", status, 0))
    Manifest("exp", "exp.yaml", 1, max(len(v) for v in runs.values()), "shuffled",
             next(iter(runs)), variants, entries).write(path)  # fmt: skip
    return path


def test_two_runs_align_on_offered_qps_and_missing_steps_stay_empty(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", [10.0, 20.0])
    b = write_run(tmp_path / "b", [15.0, 30.0, 90.0], rates=(5, 10, 20))
    c = compare(expand([a, b], []))
    assert [p.x for p in c.steps] == [5, 10, 20]
    cell = c.steps[1].cells["b"]["ttft_ms.p50"]
    assert cell.value.mean == 30.0
    assert cell.delta is not None
    assert cell.delta.relative == pytest.approx(0.5)
    assert cell.delta.noise is None  # one run each: the noise is unknown, not zero
    assert cell.delta.exceeds_noise is None
    assert c.steps[2].cells["a"]["ttft_ms.p50"].value.n == 0  # a never ran 20 QPS
    assert c.baseline == "a"
    assert compare(expand([a, b], []), "b").baseline == "b"
    with pytest.raises(UsageError) as info:
        compare(expand([a, b], []), "zzz")
    assert info.value.field == "--baseline"


def test_repeats_carry_their_noise(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", {
        "base": [[10.0, 20.0], [12.0, 22.0]],      # 10 QPS: 20, 22 → 21 ± 1
        "close": [[11.0, 21.5], [13.0, 23.5]],     # 22.5 ± 1: +1.5, within 1 + 1
        "far": [[30.0, 60.0], [31.0, 62.0]],       # 61 ± 1: +40, beyond the noise
    })  # fmt: skip
    c = compare(expand([exp], []))
    close = c.steps[1].cells["close"]["ttft_ms.p50"]
    far = c.steps[1].cells["far"]["ttft_ms.p50"]
    assert close.value.values == (21.5, 23.5)
    assert close.delta is not None
    assert far.delta is not None
    assert close.delta.absolute == pytest.approx(1.5)
    assert close.delta.noise == pytest.approx(2.0)
    assert close.delta.exceeds_noise is False
    assert far.delta.exceeds_noise is True
    data = c.to_json()
    assert data["format"] == "ramplab.comparison/1"
    assert data["x_axis"] == "target_qps"
    assert [v["name"] for v in data["variants"]] == ["base", "close", "far"]
    got = data["steps"][1]["variants"]["far"]["ttft_ms.p50"]
    assert got["mean"] == 61.0
    assert got["delta"]["exceeds_noise"] is True
    assert "**+190.5%!**" in markdown(c)


def test_fail_if_holds_only_where_the_condition_does(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", {
        "base": [[10.0, 20.0], [12.0, 22.0]],
        "close": [[11.0, 21.5], [13.0, 23.5]],
        "far": [[30.0, 60.0], [31.0, 62.0]],
    })  # fmt: skip
    groups = expand([exp], [])

    def verdict(text: str, baseline: str | None = None) -> ExitCode:
        return compare(groups, baseline, parse_conditions([text])).exit_code

    assert verdict("steps[*].ttft_ms.p50 > 1.5 * baseline") == ExitCode.SLO_MISSED
    assert verdict("steps[*].ttft_ms.p50 > 5 * baseline") == ExitCode.OK
    assert verdict("steps[*].ttft_ms.p50 > baseline + noise") == ExitCode.SLO_MISSED
    assert verdict("steps[*].ttft_ms.p50 > baseline + 100 * noise") == ExitCode.OK
    assert verdict("steps[0].ttft_ms.p50 > 2 * baseline") == ExitCode.SLO_MISSED
    assert verdict("ttft_ms.p50 < 0.5 * baseline", "far") == ExitCode.SLO_MISSED
    result = compare(groups, None, parse_conditions(["ttft_ms.p50 > 1.5 * baseline"]))
    (cond,) = result.conditions
    assert [f.variant for f in cond.findings if f.holds] == ["far"]
    for bad, field in (("ttft_ms.p77 > baseline", "--fail-if[0]"),
                       ("ttft_ms > baseline", "--fail-if[0]"),
                       ("steps[5].ttft_ms.p50 > baseline", "--fail-if[0]")):  # fmt: skip
        with pytest.raises(UsageError) as info:
            compare(groups, None, parse_conditions([bad]))
        assert info.value.field == field


def test_unfinished_runs_are_left_out_and_said_so(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", {"a": [[1.0, 2.0]], "b": [[3.0, 4.0]]})
    manifest = Manifest.read(exp)
    manifest.runs[1].status = "interrupted"
    manifest.write(exp)
    notes: list[str] = []
    groups = expand([exp], notes)
    assert [g.name for g in groups] == ["a"]
    assert notes == ["b: not compared: 02-b-r1 interrupted"]
    c = compare(groups, notes=notes)
    json_path, md_path = write_comparison(c, exp)
    assert json.loads(json_path.read_text())["notes"] == notes
    assert "02-b-r1 interrupted" in md_path.read_text()


def test_compare_cli_exit_codes_and_files(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "exp", {"fast": [[10.0, 20.0]], "slow": [[30.0, 60.0]]})
    done = ramplab(["compare", str(exp), "--fail-if", "ttft_ms.p50 > 2 * baseline"])
    assert done.returncode == 3, done.stderr
    assert "HOLDS" in done.stdout
    data = json.loads((exp / "comparison.json").read_text())
    assert data["conditions"][0]["holds"] is True
    assert (exp / "comparison.md").is_file()
    done = ramplab(["compare", str(exp), "--fail-if", "ttft_ms.p50 > 5 * baseline"])
    assert done.returncode == 0, done.stderr
    run = exp / "01-fast-r1"
    for args, field in (
        (["compare", str(exp), "--fail-if", "ttft_ms.p99 >> 2"], "--fail-if[0]"),
        (["compare", str(exp), "--fail-if", "nope.p99 > baseline"], "--fail-if[0]"),
        (["compare", str(exp), "--baseline", "medium"], "--baseline"),
        (["compare", str(tmp_path / "missing")], "RUN_OR_EXPERIMENT"),
        (["compare", str(tmp_path)], "RUN_OR_EXPERIMENT"),
        (["compare", str(run), "--metric", "nope"], "--metric[0]"),
    ):
        bad = ramplab(args)
        assert bad.returncode == 2, (args, bad.stdout, bad.stderr)
        assert f"error: {field}" in bad.stderr
        assert "Traceback" not in bad.stderr

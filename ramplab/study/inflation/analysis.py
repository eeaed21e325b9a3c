"""§3.3 Prompt token inflation: the prompt tokens and the TTFT that normalising prompts saves.

An experiment sends the same prompt file as written (the baseline variant) and normalised
(``workload.normalise``). Per variant, over the successful requests of its runs:

    prompt tokens   the server's ``usage.prompt_tokens`` (counted by the target's ``tokenizer``)
    TTFT            from the actual send (``ttft_send_ms``: the client's own lateness left out)
    prefill         the server's own prefill figure (``Server-Timing``), when it sends one

each as mean ± standard deviation. Against the baseline, a variant saves ``Δtokens`` (measured)
and ``ΔTTFT`` (measured, with a 95 % interval from Welch's standard error), and the target's
prefill model (``prefill_overhead_ms + prompt_tokens × prefill_per_token_ms``, read from the
variant's ``campaign.yaml``) expects ``ΔTTFT = Δtokens × prefill_per_token_ms``: the two side by
side say whether the time saved is the prefill saved. The analyser's count for the prompt file
(``ramplab.prompts``, the same tokenizer, the same rules) stands beside the measured tokens: a
file mean, while requests draw the prompts in turns, so the two agree within the mix's spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ramplab.campaign.schema import Campaign, load_campaign
from ramplab.errors import UsageError
from ramplab.experiment.sources import expand
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.records.schema import dicts_of
from ramplab.runs.rundir import RunDir
from ramplab.workload.prompt_file import read_prompts
from ramplab.workload.prompts import normalise_rules
from ramplab.workload.redundancy import apply_rules
from ramplab.workload.tokenizers import load_tokenizer

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["Sample", "VariantFigures", "analyse", "figures", "study_result"]

Cell = str | int | float | None
Z95 = 1.959964


@dataclass(frozen=True, slots=True)
class Sample:
    """Mean, standard deviation and count of one measure."""

    mean: float
    sd: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Sample | None:
        if not values:
            return None
        array = np.asarray(values, dtype=np.float64)
        sd = float(array.std(ddof=1)) if array.size > 1 else 0.0
        return cls(float(array.mean()), sd, int(array.size))

    def text(self, digits: int = 1) -> str:
        return f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"


def difference(a: Sample, b: Sample) -> tuple[float, float]:
    """``a − b`` and the half-width of its 95 % interval (Welch's standard error)."""
    se = math.sqrt(a.sd**2 / a.n + b.sd**2 / b.n) if a.n and b.n else 0.0
    return a.mean - b.mean, Z95 * se


@dataclass(frozen=True)
class VariantFigures:
    """One variant's pooled requests and what its campaign says about them."""

    variant: str
    rules: list[str]
    tokenizer: str  # the target's
    prefill_per_token_ms: float
    prompt_tokens: Sample | None
    ttft_ms: Sample | None
    prefill_ms: Sample | None
    analyser_tokens: float | None  # the analyser's mean tokens per prompt of the file, same rules
    failed: int


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [row for batch in RunDir(run_dir).records.batches() for row in dicts_of(batch)]


def _target_latency(campaign: Campaign) -> tuple[str, float]:
    """The target's tokenizer and prefill cost per token, as the campaign sets them (else the
    target's defaults, ``configs/app.toml``)."""
    settings = campaign.target.settings
    latency = settings.get("latency", {})
    return str(settings.get("tokenizer", "approx")), float(
        latency.get("prefill_per_token_ms", 0.05)
    )


def _analyser_mean(campaign: Campaign, tokenizer: str, rules: list[str]) -> float | None:
    path = campaign.workload.prompts_file
    if path is None:
        return None
    try:  # results moved away from the prompts file (or the extra) still get their figures
        prompts = read_prompts(Path(path))
        counter = load_tokenizer(tokenizer, "target.settings.tokenizer")
    except UsageError:
        return None
    totals = [sum(counter.count(t) for t in apply_rules(p.texts, rules)) for p in prompts]
    return sum(totals) / len(totals)


def figures(variant: str, runs: list[Path]) -> VariantFigures:
    """One variant's figures from its run directories (each holds its own ``campaign.yaml``)."""
    campaign = load_campaign(RunDir(runs[0]).campaign)
    tokenizer, per_token = _target_latency(campaign)
    rules = normalise_rules(campaign.workload.normalise, "workload.normalise")
    records = [r for run in runs for r in _records(run)]
    ok = [r for r in records if r.get("ok")]
    return VariantFigures(
        variant=variant,
        rules=rules,
        tokenizer=tokenizer,
        prefill_per_token_ms=per_token,
        prompt_tokens=Sample.of([r["prompt_tokens"] for r in ok if r.get("prompt_tokens")]),
        ttft_ms=Sample.of([r["ttft_send_ms"] for r in ok if r.get("ttft_send_ms") is not None]),
        prefill_ms=Sample.of(
            [
                r["server_timing_ms"]["prefill"]
                for r in ok
                if "prefill" in r.get("server_timing_ms", {})
            ]
        ),
        analyser_tokens=_analyser_mean(campaign, tokenizer, rules),
        failed=len(records) - len(ok),
    )


def analyse(directory: Path, manifest: Manifest) -> StudyResult:
    notes: list[str] = []
    found = [figures(g.name, [r.path for r in g.runs]) for g in expand([directory], notes)]
    return study_result(found, manifest.baseline, notes)


def _f(value: float | None, digits: int = 1) -> Cell:
    return None if value is None else round(value, digits)


def study_result(
    found: list[VariantFigures], baseline: str, notes: list[str] | None = None
) -> StudyResult:
    """The tables and conclusions from each variant's figures; ``baseline`` sends raw prompts."""
    notes = list(notes or [])
    base = next((f for f in found if f.variant == baseline), found[0] if found else None)
    token_rows: list[list[Cell]] = []
    ttft_rows: list[list[Cell]] = []
    conclusions: list[str] = []
    data: dict[str, Any] = {"baseline": base.variant if base else None, "variants": []}
    for f in found:
        rules = ", ".join(f.rules) or "none (as written)"
        token_rows.append([
            f.variant, rules, f.prompt_tokens.n if f.prompt_tokens else 0,
            f.prompt_tokens.text() if f.prompt_tokens else None, _f(f.analyser_tokens),
        ])  # fmt: skip
        entry: dict[str, Any] = {
            "variant": f.variant,
            "rules": f.rules,
            "tokenizer": f.tokenizer,
            "prefill_per_token_ms": f.prefill_per_token_ms,
            "requests_ok": f.prompt_tokens.n if f.prompt_tokens else 0,
            "failed": f.failed,
            "prompt_tokens": _sample(f.prompt_tokens),
            "ttft_send_ms": _sample(f.ttft_ms),
            "prefill_ms": _sample(f.prefill_ms),
            "analyser_tokens_mean": f.analyser_tokens,
        }
        if f.failed:
            notes.append(f"{f.variant}: {f.failed} requests failed and are left out")
        pair = _pair(base, f)
        if base is not None and pair is not None:
            (base_tokens, tokens), (base_ttft, ttft) = pair
            saved_tokens, tokens_ci = difference(base_tokens, tokens)
            saved_ttft, ttft_ci = difference(base_ttft, ttft)
            expected = saved_tokens * f.prefill_per_token_ms
            saved_prefill = (
                difference(base.prefill_ms, f.prefill_ms)[0]
                if base.prefill_ms and f.prefill_ms
                else None
            )
            share = 100.0 * saved_tokens / base_tokens.mean
            ttft_rows.append([
                f.variant, base_ttft.text(), ttft.text(), _f(saved_ttft),
                _f(ttft_ci), _f(expected), _f(saved_prefill),
                _f(saved_ttft / expected, 2) if expected else None,
            ])  # fmt: skip
            entry |= {
                "saved_tokens": saved_tokens,
                "saved_tokens_ci95": tokens_ci,
                "saved_tokens_pct": share,
                "saved_ttft_ms": saved_ttft,
                "saved_ttft_ci95_ms": ttft_ci,
                "expected_saved_ttft_ms": expected,
                "saved_prefill_ms": saved_prefill,
            }
            within = abs(saved_ttft - expected) <= ttft_ci
            conclusions.append(
                f"{f.variant} ({rules}) sends {saved_tokens:.1f} fewer prompt tokens per request "
                f"({share:.1f} % of {base_tokens.mean:.1f}, {f.tokenizer}) and saves "
                f"{saved_ttft:.1f} ± {ttft_ci:.1f} ms of TTFT (95 %); the target's prefill model "
                f"expects {expected:.1f} ms ({saved_tokens:.1f} × {f.prefill_per_token_ms:g} "
                f"ms/token): the measured saving is "
                + ("within its interval of it." if within else "outside its interval of it.")
            )
        data["variants"].append(entry)
    if base is None:
        notes.append("no variant finished: nothing to compare")
    tables = [
        StudyTable(
            "Prompt tokens per request (server usage; the analyser's file mean beside it)",
            ["variant", "rules", "requests", "prompt tokens mean ± sd", "analyser mean"],
            token_rows,
        ),
        StudyTable(
            f"TTFT saved against {base.variant if base else '-'} (from the actual send, ms)",
            [
                "variant",
                "baseline TTFT mean ± sd",
                "TTFT mean ± sd",
                "saved",
                "± 95 %",
                "expected (prefill model)",
                "prefill saved (server)",
                "measured ÷ expected",
            ],
            ttft_rows,
        ),
    ]
    return StudyResult(
        study="inflation",
        title="§3.3 Prompt token inflation — the TTFT saved",
        conclusions=conclusions,
        tables=tables,
        data=data,
        notes=notes,
    )


def _pair(
    base: VariantFigures | None, f: VariantFigures
) -> tuple[tuple[Sample, Sample], tuple[Sample, Sample]] | None:
    """(baseline, variant) prompt tokens and TTFT, when both have two requests or more."""
    if base is None or f is base:
        return None
    samples = (base.prompt_tokens, f.prompt_tokens, base.ttft_ms, f.ttft_ms)
    if any(s is None or s.n < 2 for s in samples):
        return None
    bp, fp, bt, ft = samples
    assert bp is not None
    assert fp is not None
    assert bt is not None
    assert ft is not None
    return (bp, fp), (bt, ft)


def _sample(s: Sample | None) -> dict[str, float] | None:
    return None if s is None else {"mean": s.mean, "sd": s.sd, "n": s.n}

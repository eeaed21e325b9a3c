"""The campaign's ``search:`` section: the settings of the max-rate search under SLO.

What the settings mean, and how the search uses them, is ``ramplab.search``'s docstring; this is
the schema a campaign file is validated against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ramplab.errors import UsageError
from ramplab.load.shapes import parse_duration
from ramplab.results.acceptance import Plan, plan
from ramplab.results.confidence import requests_to_pass

__all__ = ["SearchSpec"]


class SearchSpec(BaseModel):
    """The campaign's ``search:`` section (every field optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    goodput_min: float = Field(default=95.0, gt=0, le=100)
    start_qps: float = Field(default=2.0, gt=0)
    max_qps: float = Field(default=256.0, gt=0)
    min_qps: float = Field(default=0.25, gt=0)
    growth: float = Field(default=2.0, gt=1, le=16)
    resolution_pct: float = Field(default=5.0, gt=0, le=100)
    max_probes: int = Field(default=12, ge=1, le=100)
    warmup: float | str = 2.0
    window: float | str = 2.0
    windows: int = Field(default=3, ge=2, le=100)
    max_hold: float | str = 60.0
    confidence: float = Field(default=0.95, ge=0.5, le=0.999)
    # criterion: test — a system at goodput_min − tolerance_pct passes at most 1 − confidence of
    # the time, one at goodput_min at least ``power`` of the time (results/acceptance.py)
    tolerance_pct: float = Field(default=5.0, gt=0, lt=100)
    power: float = Field(default=0.9, ge=0.5, le=0.999)
    ci: Literal["wilson", "t"] = "wilson"
    criterion: Literal["test", "lower_bound", "point"] = "test"
    early_stop: bool = True
    # over-saturation
    achieved_tolerance_pct: float = Field(default=5.0, ge=0, le=100)
    drop_tolerance_pct: float = Field(default=1.0, ge=0, le=100)
    queue_growth_ms: float = Field(default=50.0, gt=0)
    lateness_growth_ms: float = Field(default=20.0, gt=0)
    # the generator
    max_generator_cpu_pct: float = Field(default=90.0, gt=0, le=100)
    max_lateness_ms: float = Field(default=50.0, gt=0)
    # a generator-limited probe is run again this many times before the search gives up
    # (a shared machine's hiccup is not a verdict)
    generator_retries: int = Field(default=1, ge=0, le=5)
    # between probes
    settle: float | str = 30.0
    cooldown: float | str = 0.0

    @property
    def goal(self) -> float:
        """``goodput_min`` as a ratio."""
        return self.goodput_min / 100.0

    def seconds(self, name: str, prefix: str = "search") -> float:
        """A duration field in seconds (``"2s"``, ``500ms``, ``2``)."""
        return parse_duration(getattr(self, name), f"{prefix}.{name}")

    def check(self, prefix: str = "search") -> None:
        """What pydantic cannot see field by field; ``UsageError`` names the field."""
        for name in ("warmup", "window", "max_hold", "settle", "cooldown"):
            self.seconds(name, prefix)
        if self.seconds("window") <= 0:
            raise UsageError(f"{prefix}.window", "must be longer than 0 s")
        if self.start_qps > self.max_qps:
            raise UsageError(
                f"{prefix}.start_qps", f"{self.start_qps:g} is above max_qps {self.max_qps:g}"
            )
        if self.min_qps > self.start_qps:
            raise UsageError(
                f"{prefix}.min_qps", f"{self.min_qps:g} is above start_qps {self.start_qps:g}"
            )
        if self.criterion == "lower_bound" and self.goodput_min >= 100:
            raise UsageError(
                f"{prefix}.goodput_min",
                "100 can never be cleared by a lower bound: lower it or set criterion: point",
            )
        if self.criterion == "test" and self.tolerance_pct >= self.goodput_min:
            raise UsageError(
                f"{prefix}.tolerance_pct",
                f"{self.tolerance_pct:g} leaves no floor below goodput_min {self.goodput_min:g}",
            )
        if self.seconds("max_hold") < self.windows * self.seconds("window"):
            raise UsageError(
                f"{prefix}.max_hold",
                f"{self.max_hold!r} is shorter than windows × window "
                f"({self.windows} × {self.seconds('window'):g} s)",
            )

    def with_flags(self, given: Mapping[str, float | None]) -> SearchSpec:
        """This spec with the values given on the command line (``None``: not given) in place of
        its own, one at a time; a ``UsageError`` names the flag (``--goodput-min``)."""
        spec = self
        for name, value in given.items():
            if value is None:
                continue
            try:
                spec = SearchSpec.model_validate({**spec.model_dump(), name: value})
            except ValidationError as exc:
                raise UsageError(f"--{name.replace('_', '-')}", exc.errors()[0]["msg"]) from None
        return spec

    @property
    def floor(self) -> float:
        """``goodput_min − tolerance_pct`` as a ratio: a probe at this attainment should fail."""
        return round(self.goal - self.tolerance_pct / 100.0, 12)

    def plan(self) -> Plan:
        """The probe's sampling plan (``criterion: test``): arrivals needed and good ones."""
        return plan(self.goal, round(self.tolerance_pct / 100.0, 12), self.confidence, self.power)

    def min_requests(self) -> int:
        """Arrivals a probe's hold is sized for: the test's plan (``criterion: test``), the
        fewest with which a perfect probe can pass (``lower_bound``), 1 (``point``)."""
        if self.criterion == "point":
            return 1
        if self.criterion == "test":
            return self.plan().requests
        return requests_to_pass(self.goal, self.confidence)

    def window_s(self, rate: float) -> float:
        """One window's length at ``rate``: ``window``, stretched so that the whole hold holds
        ``min_requests`` arrivals, at most ``max_hold`` in all."""
        base = self.seconds("window")
        needed = self.min_requests() / rate / self.windows if rate > 0 else base
        return min(max(base, needed), self.seconds("max_hold") / self.windows)

    def shape_text(self, rate: float) -> str:
        """The probe's shape: ``windows`` stages at ``rate``, the first preceded by the warm-up,
        so each window is one step of the run's summary."""
        window = self.window_s(rate)
        warmup = self.seconds("warmup")
        stages = [f"{rate!r}@{window + warmup!r}s/{warmup!r}s"]
        stages += [f"{rate!r}@{window!r}s/0.0s"] * (self.windows - 1)
        return "custom:" + ",".join(stages)

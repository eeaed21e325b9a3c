"""The run order of an experiment: repeats in blocks, variants interleaved inside each block.

A noisy machine drifts (thermal throttling, a neighbour's job, page cache, Redis growing): run
every repeat of A and then every repeat of B and the drift lands on B. So repeat ``r`` is one
block holding each variant once, and the order inside a block is

- ``shuffled`` (default): a permutation drawn per block from the campaign's seed (reproducible,
  recorded in ``experiment.json``), so no variant always runs first or last;
- ``abba``: declared order in odd blocks, reversed in even ones (A B, B A, A B, ...): a linear
  drift then costs every variant the same on average over two blocks;
- ``fixed``: the declared order in every block (for a cache warm-up you want to control).

Repeat ``r`` (1-based) runs with ``seed + r - 1`` for every variant: inside one block the variants
see the same arrival times and prompts (common random numbers, so the comparison is of the
variants, not of the draws), and the repeats sample different draws.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ramplab.campaign.variants import Experiment

__all__ = ["PlannedRun", "plan_runs"]


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One run of the plan: ``index`` is its 1-based position, ``dir`` its directory name."""

    index: int
    variant: str
    repeat: int
    seed: int
    dir: str


def plan_runs(experiment: Experiment) -> list[PlannedRun]:
    """Every run of the experiment, in the order they run."""
    rng = random.Random(experiment.seed)
    width = max(2, len(str(experiment.runs)))
    runs: list[PlannedRun] = []
    for repeat in range(1, experiment.repeat + 1):
        block = list(experiment.variants)
        if experiment.order == "shuffled":
            rng.shuffle(block)
        elif experiment.order == "abba" and repeat % 2 == 0:
            block.reverse()
        for variant in block:
            index = len(runs) + 1
            seed = variant.campaign.seed + repeat - 1
            name = f"{index:0{width}d}-{variant.slug}-r{repeat}"
            runs.append(PlannedRun(index, variant.name, repeat, seed, name))
    return runs

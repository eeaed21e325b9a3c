"""Arrival processes (constant, Poisson, gamma), the global schedule and its split by worker."""

from ramplab.load.arrivals.base import ArrivalProcess, Offsets
from ramplab.load.arrivals.constant import ConstantArrivals
from ramplab.load.arrivals.gamma import GammaArrivals
from ramplab.load.arrivals.poisson import PoissonArrivals
from ramplab.load.arrivals.schedule import (
    Schedule,
    ScheduleChunk,
    build_schedule,
    make_process,
    schedule_chunks,
)
from ramplab.load.arrivals.split import (
    Epoch,
    ShareChunk,
    every_nth,
    share_chunks,
    split_schedule,
    worker_share,
)

__all__ = [
    "ArrivalProcess",
    "ConstantArrivals",
    "Epoch",
    "GammaArrivals",
    "Offsets",
    "PoissonArrivals",
    "Schedule",
    "ScheduleChunk",
    "ShareChunk",
    "build_schedule",
    "every_nth",
    "make_process",
    "schedule_chunks",
    "share_chunks",
    "split_schedule",
    "worker_share",
]

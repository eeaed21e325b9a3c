"""Arrival processes (constant, Poisson, gamma), the global schedule and its split by worker."""

from ramplab.load.arrivals.base import ArrivalProcess, Offsets
from ramplab.load.arrivals.constant import ConstantArrivals
from ramplab.load.arrivals.gamma import GammaArrivals
from ramplab.load.arrivals.poisson import PoissonArrivals
from ramplab.load.arrivals.schedule import Schedule, build_schedule, make_process
from ramplab.load.arrivals.split import Epoch, every_nth, split_schedule, worker_share

__all__ = [
    "ArrivalProcess",
    "ConstantArrivals",
    "Epoch",
    "GammaArrivals",
    "Offsets",
    "PoissonArrivals",
    "Schedule",
    "build_schedule",
    "every_nth",
    "make_process",
    "split_schedule",
    "worker_share",
]

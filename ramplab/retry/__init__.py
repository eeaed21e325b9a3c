"""Retry policies (§4.4): when a failed attempt is tried again, and after how long."""

from ramplab.retry.backoff import (
    Backoff,
    DecorrelatedJitter,
    EqualJitter,
    Exponential,
    Fixed,
    FullJitter,
    Rng,
)
from ramplab.retry.base import AttemptOutcome, NoRetry, RetryPolicy
from ramplab.retry.budget import RetryBudget
from ramplab.retry.config import RetryConfig, RetrySetup, build_retry, parse_retry
from ramplab.retry.policy import Retrier, RetryAfter, RetryOn
from ramplab.retry.throttle import AdaptiveThrottle
from ramplab.retry.window import SlidingCounter

__all__ = [
    "AdaptiveThrottle",
    "AttemptOutcome",
    "Backoff",
    "DecorrelatedJitter",
    "EqualJitter",
    "Exponential",
    "Fixed",
    "FullJitter",
    "NoRetry",
    "Retrier",
    "RetryAfter",
    "RetryBudget",
    "RetryConfig",
    "RetryOn",
    "RetryPolicy",
    "RetrySetup",
    "Rng",
    "SlidingCounter",
    "build_retry",
    "parse_retry",
]

"""Retry policies (§4.4): when a failed attempt is tried again, and after how long."""

from ramplab.retry.base import AttemptOutcome, NoRetry, RetryPolicy

__all__ = ["AttemptOutcome", "NoRetry", "RetryPolicy"]

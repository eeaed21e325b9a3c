"""The plan message: what the master broadcasts is what a worker rebuilds."""

from __future__ import annotations

from ramplab.load.plan import Plan


def test_plan_message_round_trips_with_the_cap() -> None:
    plan = Plan(1.0, "1@1s", "poisson", 1, "open", "drop", [(0.0, ["w"])], max_users=64)
    assert Plan.from_message(plan.to_message()) == plan


def test_plan_from_an_older_master_has_no_cap() -> None:
    plan = Plan(1.0, "1@1s", "poisson", 1, "open", "drop", [(0.0, ["w"])], max_users=64)
    older = {k: v for k, v in plan.to_message().items() if k != "max_users"}
    assert Plan.from_message(older).max_users is None

"""``--ramplab-*`` option checks, on a parsed-options namespace as Locust hands it over."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ramplab.errors import UsageError
from ramplab.options.run import from_options


def test_zero_is_a_value_not_a_missing_option() -> None:
    # Regression: `value or default` turned seed 0 into 1 and drain 0 into 30 s, so a campaign
    # with `seed: 0` or `drain_s: 0` silently ran another schedule or waited 30 s.
    options = from_options(SimpleNamespace(ramplab_shape="1@2s", ramplab_seed=0, ramplab_drain=0.0))
    assert options.seed == 0
    assert options.drain_s == 0.0


@pytest.mark.parametrize(
    ("dest", "value", "flag"),
    [
        ("ramplab_max_users", 0, "--ramplab-max-users"),
        ("ramplab_headroom", 0.0, "--ramplab-headroom"),
        ("ramplab_drain", -1.0, "--ramplab-drain"),
    ],
)
def test_out_of_range_value_names_the_option(dest: str, value: float, flag: str) -> None:
    # 0 users and 0 headroom used to fall back to the defaults (1000, 1.5) without a word.
    with pytest.raises(UsageError) as caught:
        from_options(SimpleNamespace(ramplab_shape="1@2s", **{dest: value}))
    assert caught.value.field == flag


def test_absent_options_take_the_documented_defaults() -> None:
    options = from_options(SimpleNamespace(ramplab_shape="1@2s"))
    assert (options.seed, options.max_users, options.headroom, options.drain_s) == (
        1,
        1000,
        1.5,
        30.0,
    )

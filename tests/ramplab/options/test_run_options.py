"""``--ramplab-*`` option checks, on a parsed-options namespace as Locust hands it over."""

from __future__ import annotations

from pathlib import Path
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


def test_a_session_holds_its_user_for_every_turn_in_the_sizing_prior() -> None:
    # 1 s + 10 tokens x 50 ms per request, 3 turns, 2 think times of mean 2 s.
    options = from_options(
        SimpleNamespace(
            ramplab_shape="1@2s", max_tokens=10, session_turns=3, session_think_time="exponential:2"
        )
    )
    assert options.duration_prior_s == pytest.approx(3 * 1.5 + 2 * 2.0)


@pytest.mark.parametrize(
    ("more", "flag", "says"),
    [
        ({"ramplab_mode": "closed", "ramplab_shape": "1@2s"}, "--session-turns", "open-loop"),
        ({"ramplab_trace": "TRACE"}, "--session-turns", "single requests"),
    ],
)
def test_sessions_need_the_open_loop_and_no_trace(
    tmp_path: Path, more: dict[str, str], flag: str, says: str
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 3, "output_length": 2}\n')
    more = {k: (str(trace) if v == "TRACE" else v) for k, v in more.items()}
    with pytest.raises(UsageError, match=says) as caught:
        from_options(SimpleNamespace(session_turns=2, **more))
    assert caught.value.field == flag


def test_a_trace_replay_brings_its_shape_and_refuses_another(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(
        f'{{"timestamp": {ms}, "input_length": 3, "output_length": 2}}\n' for ms in (0, 1000, 2000)
    ))  # fmt: skip
    options = from_options(SimpleNamespace(ramplab_trace=str(trace), ramplab_trace_speed=2.0))
    assert options.arrivals.startswith("trace:2.0:1:0:")
    assert options.shape is not None
    (stage,) = options.shape.stages
    assert (stage.duration_s, stage.rate) == (1.5, 2.0)
    with pytest.raises(UsageError, match="takes its shape from the trace") as caught:
        from_options(SimpleNamespace(ramplab_trace=str(trace), ramplab_shape="1@2s"))
    assert caught.value.field == "--ramplab-shape"
    with pytest.raises(UsageError, match="open-loop") as caught:
        from_options(SimpleNamespace(ramplab_trace=str(trace), ramplab_mode="closed"))
    assert caught.value.field == "--ramplab-mode"
    with pytest.raises(UsageError, match="No such file") as caught:
        from_options(SimpleNamespace(ramplab_trace=str(tmp_path / "nope.jsonl")))
    assert caught.value.field == "--ramplab-trace"

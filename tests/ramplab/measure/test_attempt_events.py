"""``_handle_event`` against the straightforward reference it replaced (issue 16's speed work).

The fast version walks an event's choices once and skips lookups it can prove empty; the
reference below is the code as it was, with a separate walk for the signed content and for the
token text and generic ``Mapping`` checks. Random chunks — odd choices (not a list, not objects,
several), deltas with content, reasoning, both or neither, legacy ``text``, usage, errors — and
comment lines must leave every field of ``AttemptResult`` the same and fail the same way. One
change on purpose, in both: ``choices`` that is there but not an array is ``malformed_json``
(a number used to raise a ``TypeError`` out of the attempt; a string or object was walked).
A second, with the APIs (``apis.py``): the first choice's legacy ``text`` is signed content too,
as ``delta.content`` is (``/v1/completions`` streams carry it there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ramplab.errors import IntegrityError
from ramplab.measure.attempt import _handle_event, _StreamFailure
from ramplab.measure.integrity import Signature
from ramplab.measure.result import AttemptResult, TokenEvent
from ramplab.measure.sse import SSEEvent


def _content_text(chunk: Mapping[str, Any]) -> tuple[str, bool]:
    text = ""
    answer = False
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, Mapping):
            continue
        delta = choice.get("delta") or {}
        if isinstance(delta, Mapping):
            value = delta.get("content")
            if isinstance(value, str) and value:
                text += value
                answer = True
            for key in ("reasoning_content", "reasoning"):
                value = delta.get(key)
                if isinstance(value, str):
                    text += value
        value = choice.get("text")
        if isinstance(value, str) and value:
            text += value
            answer = True
    return text, answer


def _collect_content(result: AttemptResult, chunk: Mapping[str, Any]) -> None:
    choices = chunk.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        delta = choices[0].get("delta")
        if isinstance(delta, Mapping) and isinstance(delta.get("content"), str):
            result.content_parts.append(delta["content"])
        if isinstance(choices[0].get("text"), str):
            result.content_parts.append(choices[0]["text"])


def _apply_usage(result: AttemptResult, usage: Any) -> None:
    if isinstance(usage, Mapping):
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        if isinstance(prompt, int):
            result.prompt_tokens = prompt
        if isinstance(completion, int):
            result.completion_tokens = completion
        details = usage.get("completion_tokens_details")
        if isinstance(details, Mapping) and isinstance(details.get("reasoning_tokens"), int):
            result.reasoning_tokens = details["reasoning_tokens"]
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
            result.cached_tokens = details["cached_tokens"]


def reference_handle_event(result: AttemptResult, event: SSEEvent) -> None:
    if event.comment is not None:
        name, _, payload = event.comment.partition(" ")
        if name == "ramplab-signature":
            try:
                result.signature = Signature.from_comment(payload)
            except IntegrityError as exc:
                result.signature_problem = str(exc)
        elif name == "ramplab-timing":
            try:
                timing = orjson.loads(payload)
            except orjson.JSONDecodeError:
                return
            if isinstance(timing, dict):
                for key, value in timing.items():
                    if key.endswith("_ms") and isinstance(value, int | float):
                        result.server_timing_ms[key.removesuffix("_ms")] = float(value)
                events = timing.get("events_ms")
                if isinstance(events, list) and all(isinstance(v, int | float) for v in events):
                    result.server_events_ms = [float(v) for v in events]
                seed = timing.get("seed")
                if isinstance(seed, int) and result.seed is None:
                    result.seed = seed
                chunk_size = timing.get("chunk_size")
                if isinstance(chunk_size, int) and chunk_size > 0:
                    result.server_tokens_per_event = chunk_size
        return
    result.events += 1
    if event.event == "error":
        raise _StreamFailure("stream_error", event.data[:500])
    if event.data.strip() == "[DONE]":
        result.saw_done = True
        return
    try:
        chunk = orjson.loads(event.data)
    except orjson.JSONDecodeError as exc:
        raise _StreamFailure("malformed_json", f"{exc}: {event.data[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise _StreamFailure("malformed_json", f"event is not a JSON object: {event.data[:200]!r}")
    if "error" in chunk and not chunk.get("choices"):
        raise _StreamFailure("stream_error", event.data[:500])
    if chunk.get("choices") and not isinstance(chunk["choices"], list):
        raise _StreamFailure("malformed_json", f"choices is not an array: {event.data[:200]!r}")
    _apply_usage(result, chunk.get("usage"))
    if result.completion_id is None and isinstance(chunk.get("id"), str):
        result.completion_id = chunk["id"]
    _collect_content(result, chunk)
    text, answer = _content_text(chunk)
    if text:
        result.token_events.append(TokenEvent(event.first_byte_at, text, answer))


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2), st.sampled_from(["", " a"])
)
TEXTS = st.one_of(st.sampled_from(["", " tok", "思"]), st.just(" x"), SCALARS)


def _some_of(draw: st.DrawFn, values: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    return {key: draw(value) for key, value in values.items() if draw(st.booleans())}


@st.composite
def deltas(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 5)) == 0:
        return draw(st.one_of(SCALARS, st.lists(SCALARS, max_size=2)))
    keys = {"content": TEXTS, "reasoning_content": TEXTS, "reasoning": TEXTS}
    return _some_of(draw, {**keys, "role": st.just("assistant")})


@st.composite
def choices(draw: st.DrawFn) -> Any:
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return draw(st.one_of(SCALARS, st.just({"delta": {"content": "x"}})))
    if shape == 1:
        return []
    one = st.one_of(
        st.builds(lambda d, i: {"index": i, "delta": d}, deltas(), st.integers(0, 2)),
        st.builds(lambda d, t: {"delta": d, "text": t}, deltas(), TEXTS),
        st.fixed_dictionaries({}, optional={"text": TEXTS}),
        SCALARS,
    )
    return draw(st.lists(one, min_size=1, max_size=3))


@st.composite
def usages(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(SCALARS)
    details = {"reasoning_tokens": SCALARS}
    cached = {"cached_tokens": SCALARS}
    return _some_of(
        draw,
        {
            "prompt_tokens": SCALARS,
            "completion_tokens": SCALARS,
            "completion_tokens_details": st.one_of(SCALARS, st.builds(dict, **details)),
            "prompt_tokens_details": st.one_of(SCALARS, st.builds(dict, **cached)),
        },
    )


@st.composite
def chunks(draw: st.DrawFn) -> dict[str, Any]:
    chunk = {"id": draw(st.one_of(st.sampled_from(["chatcmpl-1", "chatcmpl-2"]), SCALARS))}
    chunk["choices"] = draw(choices())
    if draw(st.integers(0, 3)) == 0:
        chunk["usage"] = draw(usages())
    if draw(st.integers(0, 9)) == 0:
        chunk["error"] = {"message": "boom"}
    return {key: value for key, value in chunk.items() if draw(st.integers(0, 9))}


COMMENTS = st.sampled_from(
    [
        'ramplab-timing {"queue_ms":1,"decode_ms":2.5,"seed":7,"chunk_size":2,"events_ms":[1,2.5]}',
        'ramplab-timing {"events_ms":[1,"x"],"seed":true,"chunk_size":0,"n_ms":null}',
        "ramplab-timing not json",
        'ramplab-signature {"alg":"RS256","kid":"k","sig":"AAEC"}',
        "ramplab-signature {}",
        "something else",
    ]
)
EVENTS = st.one_of(
    chunks().map(lambda chunk: SSEEvent(orjson.dumps(chunk).decode())),
    chunks().map(lambda chunk: SSEEvent(orjson.dumps(chunk).decode())),
    COMMENTS.map(lambda text: SSEEvent("", "comment", text)),
    st.sampled_from([SSEEvent("[DONE]"), SSEEvent(" [DONE] "), SSEEvent("{nope"), SSEEvent("[1]")]),
    st.just(SSEEvent('{"error":{}}', "error")),
)


def _outcome(
    handle: Callable[[AttemptResult, SSEEvent], None], events: list[SSEEvent]
) -> tuple[AttemptResult, list[tuple[str, str]]]:
    # Every event is handled, past failures too, so one early failure hides nothing after it.
    result = AttemptResult(sent_at=0.0, sent_epoch=0.0)
    failures: list[tuple[str, str]] = []
    for index, event in enumerate(events):
        event.first_byte_at = float(index)
        try:
            handle(result, event)
        except _StreamFailure as exc:
            failures.append((exc.kind, exc.detail))
    return result, failures


@settings(max_examples=500, deadline=None)
@given(events=st.lists(EVENTS, max_size=12))
def test_same_result_as_the_reference_for_any_events(events: list[SSEEvent]) -> None:
    assert _outcome(_handle_event, events) == _outcome(reference_handle_event, events)


def test_choices_that_are_not_an_array_are_malformed() -> None:
    for data in ('{"choices": 1}', '{"choices": "abc"}', '{"choices": {"delta": {}}}'):
        result, failures = _outcome(_handle_event, [SSEEvent(data)])
        assert [kind for kind, _ in failures] == ["malformed_json"]
        assert result.token_events == []

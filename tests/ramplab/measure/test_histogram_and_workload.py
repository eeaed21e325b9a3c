from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from ramplab.errors import UsageError
from ramplab.measure.chain import allocate_tokens
from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.options import kinds
from ramplab.options.settings import UserSettings
from ramplab.options.workload import request_body
from ramplab.records.schema import record_from_dict
from ramplab.workload.prompts import FilePrompts, SyntheticPrompts
from ramplab.workload.tokenizers import ApproxTokenizer


def test_token_allocation_rules() -> None:
    counter = ApproxTokenizer()
    texts = [" ka", " lo mi", " ren"]
    assert allocate_tokens(texts, 3, None, counter) == [1, 1, 1]  # usage == events
    assert allocate_tokens(texts, 10, 4, counter) == [4, 4, 2]  # server's declared chunk size
    scaled = allocate_tokens(texts, 8, None, counter)
    assert sum(scaled) == 8
    assert scaled[1] > scaled[0]
    assert allocate_tokens(texts, None, None, counter) == [1, 2, 1]  # tokenizer alone


def test_synthetic_prompt_length_and_body() -> None:
    messages = SyntheticPrompts(50, 0.0, random.Random(1)).next()
    assert ApproxTokenizer().count(messages[0]["content"]) == 50
    settings = UserSettings(max_tokens=9, chunk_size=3, temperature=0.5, extra_body={"top_p": 0.9})
    body = request_body(settings, "m", messages)
    assert body["stream_options"] == {"include_usage": True}
    assert (body["chunk_size"], body["max_tokens"], body["temperature"], body["top_p"]) == (
        3,
        9,
        0.5,
        0.9,
    )
    plain = request_body(UserSettings(stream=False), "m", messages)
    assert "chunk_size" not in plain
    assert "stream_options" not in plain
    assert "ignore_eos" not in plain


def test_file_prompts_cycle_and_bad_lines_name_the_option(tmp_path: Path) -> None:
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt": "a"}\n\n{"messages": [{"role": "user", "content": "b"}]}\n')
    source = FilePrompts.load(good)
    assert [source.next()[0]["content"] for _ in range(3)] == ["a", "b", "a"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{oops\n')
    with pytest.raises(UsageError, match=r"--prompts-file: .* line 2"):
        FilePrompts.load(bad)


def test_option_parsers_and_checks_name_the_problem() -> None:
    with pytest.raises(UsageError, match="--max-tokens: must be at least 1"):
        kinds.integer(1).parse("0", "--max-tokens")
    with pytest.raises(UsageError, match="--extra-body: must be a JSON object"):
        kinds.JSON_OBJECT.parse("[1]", "--extra-body")
    with pytest.raises(UsageError, match="--api-key"):
        UserSettings(auth="api-key").check()


def test_record_to_dict_is_asdict_and_round_trips() -> None:
    record = RequestRecord(
        request_id="r", worker="w", intended_start=1.0, actual_start=1.5, ok=True, status=200,
        error_kind=None, itl_ms=[1.0, 2.0], phases_ms={"dns": 0.1}, server_events_ms=[3.0],
        attempt_log=[AttemptRecord(1, 1.5, 200, None, 9.0)], integrity="verified",
    )  # fmt: skip
    data = record.to_dict()
    assert data == dataclasses.asdict(record)
    data["itl_ms"].append(9.0)  # a copy: the record is not changed through it
    assert record.itl_ms == [1.0, 2.0]
    assert record_from_dict(record.to_dict()) == record

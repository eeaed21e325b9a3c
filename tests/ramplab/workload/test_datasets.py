"""Dataset reading, counting, filtering, ordering; output lengths; shared prefixes: hand-made.

Texts are made of four-letter words, which the ``approx`` tokenizer (and the reference target)
count as one token each, so every length below is exact.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from ramplab.errors import UsageError
from ramplab.workload.dataset import Dataset, TokenRange, parse_range
from ramplab.workload.dataset_formats import read_exchanges
from ramplab.workload.lengths import OutputLengths, parse_output_lengths
from ramplab.workload.prefix import SharedPrefix, parse_shared_prefix
from ramplab.workload.prompts import FilePrompts, SyntheticPrompts
from ramplab.workload.source import Workload
from ramplab.workload.tokenizers import load_tokenizer

APPROX = load_tokenizer("approx")


def words(n: int) -> str:
    return " ".join(["word"] * n)


def chat(prompt: int, answer: int | None, *, style: str = "sharegpt") -> dict[str, Any]:
    if style == "sharegpt":
        turns = [{"from": "human", "value": words(prompt)}]
        if answer is not None:
            turns.append({"from": "gpt", "value": words(answer)})
    else:
        turns = [{"role": "user", "content": words(prompt)}]
        if answer is not None:
            turns.append({"role": "assistant", "content": words(answer)})
    return {"conversations": turns}


def write_jsonl(path: Path, items: list[Any]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


LENGTHS = [(10, 30), (20, 5), (40, 100), (80, 7), (5, 60)]


def test_sharegpt_json_both_turn_styles_round_trip_lengths(tmp_path: Path) -> None:
    items = [
        chat(p, a, style="openai" if i % 2 else "sharegpt") for i, (p, a) in enumerate(LENGTHS)
    ]
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(items))
    dataset = Dataset.load(path, APPROX)
    assert dataset.format == "sharegpt"
    assert sorted((e.prompt_tokens, e.output_tokens) for e in dataset.entries) == sorted(LENGTHS)


def test_system_turns_before_the_prompt_are_kept_and_no_human_turn_is_skipped(
    tmp_path: Path,
) -> None:
    items = [
        {"conversations": [{"from": "system", "value": "be kind"}, {"from": "human", "value": "hi"},
                           {"from": "gpt", "value": "hello"}, {"from": "human", "value": "x"}]},
        {"conversations": [{"from": "gpt", "value": "nobody asked"}]},
    ]  # fmt: skip
    fmt, exchanges, skipped = read_exchanges(write_jsonl(tmp_path / "c.jsonl", items))
    assert fmt == "sharegpt"
    assert exchanges[0].messages == [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hi"},
    ]
    assert exchanges[0].answer == "hello"
    assert [s.why for s in skipped] == ["no human turn"]
    assert skipped[0].where.endswith("c.jsonl:2")


def test_prompt_jsonl_and_text_files(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "p.jsonl", [
        {"prompt": words(3), "output_tokens": 12},
        {"messages": [{"role": "user", "content": words(4)}]},
    ])  # fmt: skip
    entries = Dataset.load(jsonl, APPROX, seed=1).entries
    assert sorted((e.prompt_tokens, e.output_tokens or 0) for e in entries) == [(3, 12), (4, 0)]
    text = tmp_path / "p.txt"
    text.write_text(f"{words(2)}\n\n{words(6)}\n")
    assert sorted(e.prompt_tokens for e in Dataset.load(text, APPROX).entries) == [2, 6]


@pytest.mark.parametrize(
    ("name", "content", "named"),
    [
        ("bad.jsonl", '{"conversations": []}\n{oops\n', "bad.jsonl:2"),
        ("bad.jsonl", '{"conversations": [{"from": "human", "value": 3}]}\n',
         "bad.jsonl:1: conversations[0].value must be a string"),
        ("bad.json", '[{"conversations": []}, {"turns": []}]', "bad.json item 1"),
        ("bad.json", '{"conversations": []}', "expected a JSON array"),
        ("p.jsonl", '{"prompt": "hi", "output_tokens": 0}\n', "p.jsonl:1: output_tokens"),
        ("p.jsonl", '{"text": "hi"}\n', 'p.jsonl:1: needs "prompt"'),
        ("empty.txt", "\n\n", "holds no prompt"),
    ],
)  # fmt: skip
def test_bad_files_name_the_file_and_line(tmp_path: Path, name: str, content: str,
                                          named: str) -> None:  # fmt: skip
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UsageError, match="--dataset") as caught:
        Dataset.load(path, APPROX)
    assert named in str(caught.value)


def test_filters_sample_and_seeded_order(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [chat(p, a) for p, a in LENGTHS])
    kept = Dataset.load(path, APPROX, prompt_range=parse_range("10..40", "f"),
                        output_range=parse_range("..50", "f"))  # fmt: skip
    assert sorted((e.prompt_tokens, e.output_tokens) for e in kept.entries) == [(10, 30), (20, 5)]
    assert kept.filtered == 3
    one = [e.where for e in Dataset.load(path, APPROX, seed=7).entries]
    assert one == [e.where for e in Dataset.load(path, APPROX, seed=7).entries]
    assert one != [e.where for e in Dataset.load(path, APPROX, seed=8).entries]
    assert len(Dataset.load(path, APPROX, sample=2, seed=7)) == 2
    assert [e.where for e in Dataset.load(path, APPROX, sample=2, seed=7).entries] == one[:2]
    with pytest.raises(UsageError, match="none of its 5 prompts"):
        Dataset.load(path, APPROX, prompt_range=TokenRange(1000, None))


def test_ranges() -> None:
    assert parse_range("", "f").open
    assert parse_range("5..", "f") == TokenRange(5, None)
    assert parse_range("..9", "f").holds(9)
    assert not parse_range("..9", "f").holds(None)  # no output length fails a closed filter
    for bad in ("5", "9..5", "a..b", "-1..3"):
        with pytest.raises(UsageError, match="f"):
            parse_range(bad, "f")


def test_output_lengths() -> None:
    assert parse_output_lengths("max_tokens") == OutputLengths()
    uniform = parse_output_lengths("uniform:10,20")
    draws = [uniform.draw(3, i) for i in range(300)]
    assert min(draws) >= 10
    assert max(draws) <= 20
    assert draws == [uniform.draw(3, i) for i in range(300)]  # a function of (seed, index)
    normal = parse_output_lengths("normal:100,0")
    assert {normal.draw(1, i) for i in range(5)} == {100}
    lognormal = parse_output_lengths("lognormal:64,0.5")
    assert sorted(lognormal.draw(0, i) for i in range(301))[150] == pytest.approx(64, rel=0.15)
    for bad in ("fixed", "uniform:0,5", "uniform:9,3", "normal:1", "normal:-1,2", "normal:a,b"):
        with pytest.raises(UsageError, match="--output-lengths"):
            parse_output_lengths(bad)


def test_shared_prefix_slots_and_salt() -> None:
    prefix = SharedPrefix(prefixes=3, prefix_tokens=16, requests_per_prefix=4)
    slots = [prefix.slot(i) for i in range(24)]
    assert slots[:4] == [(0, 0), (0, 1), (0, 2), (0, 0)]
    assert set(slots[:12]) == {(0, 0), (0, 1), (0, 2)}
    assert [slots[:12].count((0, p)) for p in range(3)] == [4, 4, 4]  # M requests each
    assert slots[12] == (1, 0)  # then N new prefixes
    text = prefix.text("a", 0)
    assert APPROX.count(text) == 16
    assert text == prefix.text("a", 3)
    assert text != prefix.text("a", 1)
    assert text != prefix.text("b", 0)  # another run's salt: another prefix
    assert prefix.expected_hits(12) == 9
    assert prefix.expected_hits(14) == 9
    assert prefix.expected_hits(20) == 9 + 5


def test_shared_prefix_option_errors_name_the_field() -> None:
    assert parse_shared_prefix({}, "--shared-prefix") is None
    with pytest.raises(UsageError, match=r"--shared-prefix\.prefix_tokens"):
        parse_shared_prefix(
            {"prefixes": 2, "prefix_tokens": 0, "requests_per_prefix": 3}, "--shared-prefix"
        )
    with pytest.raises(UsageError, match=r"--shared-prefix\.size"):
        parse_shared_prefix({"size": 2}, "--shared-prefix")


def test_workload_request_i_is_the_same_in_every_process(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [chat(p, a) for p, a in LENGTHS])
    dataset = Dataset.load(path, APPROX, seed=2)
    prefix = SharedPrefix(2, 8, 3)

    def make() -> Workload:
        return Workload(dataset, OutputLengths("dataset"), prefix, salt="s", seed=2)

    class Unused:
        prompt_tokens = None

        def next(self) -> list[dict[str, Any]]:
            raise AssertionError("a dataset workload never asks the user for a prompt")

    fallback = Unused()

    one, other = make(), make()
    for i in (0, 4, 9, 3):
        a, b = one.next(i, fallback), other.next(i, fallback)
        assert a == b
        entry = dataset.entry(i)
        assert a.max_tokens == entry.output_tokens
        assert a.tokens == entry.prompt_tokens + 8  # the dataset's count and the prefix's
        assert a.messages[0] == {"role": "system", "content": prefix.text("s", i)}
        assert a.messages[1:] == entry.messages
    counted = make()
    assert [counted.next(None, fallback) for _ in range(3)] == [
        one.next(i, fallback) for i in range(3)
    ]


def test_without_a_dataset_the_users_prompts_get_the_prefix_and_drawn_lengths() -> None:
    workload = Workload(None, parse_output_lengths("uniform:5,9"), SharedPrefix(1, 4, 2), "s")
    prompt = workload.next(0, FilePrompts([[{"role": "user", "content": "mine"}]]))
    assert prompt.messages[1] == {"role": "user", "content": "mine"}
    assert prompt.tokens is None  # read from a file: no size was asked for
    sized = workload.next(1, SyntheticPrompts(6, 0, random.Random(1)))
    assert sized.tokens == 6 + 4
    assert prompt.max_tokens is not None
    assert 5 <= prompt.max_tokens <= 9
    with pytest.raises(UsageError, match="--output-lengths"):
        Workload(None, OutputLengths("dataset"))

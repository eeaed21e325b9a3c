"""A dataset against the real target, and ``ramplab dataset inspect`` as users run it.

The round trip: each request built from a dataset entry (``Workload`` → ``request_body`` →
``RequestChain``, the code the Locust users run) comes back with the server's ``usage``
reporting exactly the entry's prompt tokens and — with ``ignore_eos`` and ``--output-lengths
dataset`` — exactly its output tokens. Texts of four-letter words count the same with ramplab's
``approx`` and the target's tokenizer; the target counts the messages joined by a newline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from ramplab.campaign.preflight import check_campaign
from ramplab.campaign.schema import parse_campaign
from ramplab.errors import UsageError
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.options.settings import UserSettings
from ramplab.options.workload import request_body
from ramplab.workload.dataset import Dataset
from ramplab.workload.inspect import print_inspection
from ramplab.workload.lengths import OutputLengths
from ramplab.workload.prompts import FilePrompts
from ramplab.workload.source import Workload
from ramplab.workload.tokenizers import load_tokenizer
from tests.support.cli import ramplab
from tests.support.processes import REPO
from tests.support.targets import SharedTarget

SAMPLE = REPO / "campaigns" / "datasets" / "sharegpt-sample.json"
LENGTHS = [(12, 9), (30, 4), (7, 21), (50, 2), (3, 16), (25, 11)]


def words(n: int, word: str = "tick") -> str:
    return " ".join([word] * n)


def write_sharegpt(path: Path) -> Path:
    items = [
        {
            "conversations": [
                {"from": "human", "value": words(p)},
                {"from": "gpt", "value": words(a)},
            ]
        }
        for p, a in LENGTHS
    ]
    path.write_text(json.dumps(items))
    return path


def test_dataset_lengths_round_trip_through_the_real_target(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    target = shared_target.reset({"latency": {"itl_ms": 1.0, "prefill_overhead_ms": 1.0}})
    dataset = Dataset.load(write_sharegpt(tmp_path / "d.json"), load_tokenizer("approx"), seed=4)
    workload = Workload(dataset, OutputLengths("dataset"), seed=4)
    settings = UserSettings(ignore_eos=True)
    sent = []
    with make_client(ClientOptions()) as client:
        chain = RequestChain(client, Endpoint(target.url + "/v1/chat/completions"))
        for i in range(len(LENGTHS)):
            prompt = workload.next(i, FilePrompts([[]]))
            record = chain.run(request_body(settings, "ramplab-sim-1", prompt.messages,
                                            prompt.max_tokens))  # fmt: skip
            assert record.ok, record.error_detail
            sent.append((record.prompt_tokens, record.output_tokens))
    expected = [(dataset.entry(i).prompt_tokens, dataset.entry(i).output_tokens) for i in range(6)]
    assert sent == expected
    assert sorted(sent) == sorted(LENGTHS)  # every entry once, in the seeded order


def test_inspect_json_reports_the_lengths_and_names_the_tokenizer(tmp_path: Path) -> None:
    done = ramplab(["dataset", "inspect", str(write_sharegpt(tmp_path / "d.json")), "--json",
                    "--prompt-tokens", "5..40"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["tokenizer"] == "approx"
    assert data["format"] == "sharegpt"
    assert (data["read"], data["filtered_out"], data["kept"]) == (6, 2, 4)
    assert data["prompt_tokens"]["sum"] == 12 + 30 + 7 + 25
    assert data["output_tokens"]["max"] == 21
    assert data["prompt_tokens"]["histogram"] == [
        {"low": 4, "high": 8, "count": 1},
        {"low": 8, "high": 16, "count": 1},
        {"low": 16, "high": 32, "count": 2},
    ]


def test_inspect_table_of_the_shipped_sample_with_a_real_tokenizer() -> None:
    console = Console(record=True, width=200)
    print_inspection(console, Dataset.load(SAMPLE, load_tokenizer("cl100k_base")))
    shown = console.export_text()
    assert "tokenizer cl100k_base · 16 read, skipped: none, 0 filtered out, 16 kept" in shown
    assert "Prompt tokens (cl100k_base)" in shown
    assert "Output tokens (cl100k_base)" in shown


def test_a_bad_line_exits_2_naming_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "chats.jsonl"
    bad.write_text('{"conversations": [{"from": "human", "value": "hi"}]}\n{"conversations": 3}\n')
    done = ramplab(["dataset", "inspect", str(bad)])
    assert done.returncode == 2
    assert f"{bad}:2" in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_reads_the_dataset_before_any_process_starts(tmp_path: Path) -> None:
    bad = tmp_path / "chats.jsonl"
    bad.write_text('{"conversations": [{"from": "human", "value": "hi"}]}\n{"conversations": 3}\n')
    campaign = parse_campaign({"shape": "1@2s", "workload": {"dataset": str(bad)}})
    with pytest.raises(UsageError, match=r"workload\.dataset") as caught:
        check_campaign(campaign)
    assert f"{bad}:2" in str(caught.value)
    good = parse_campaign({"shape": "1@2s", "workload": {"dataset": str(SAMPLE)}})
    check_campaign(good)

"""`ramplab prompts` as a real process: the tables, JSON, a normalised file, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ramplab.workload.prompt_file import read_prompts
from tests.ramplab.workload.conftest import MINILM, SAMPLE
from tests.support.cli import ramplab


def test_analyse_json_with_two_tokenizers() -> None:
    done = ramplab(["prompts", "analyse", str(SAMPLE), "--tokenizer", "cl100k_base",
                    "--tokenizer", str(MINILM), "--json"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [t["name"] for t in doc["tokenizers"]] == ["cl100k_base", "hf:all-minilm-l6-v2"]


def test_analyse_table_and_normalise(tmp_path: Path) -> None:
    done = ramplab(["prompts", "analyse", str(SAMPLE), "--per-prompt"])
    assert done.returncode == 0, done.stderr
    assert "tokenizer cl100k_base" in done.stdout
    assert "duplicate-lines" in done.stdout
    out = tmp_path / "normalised.jsonl"
    done = ramplab(["prompts", "normalise", str(SAMPLE), "-o", str(out), "--keep", "markdown",
                    "--tokenizer", "cl100k_base"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "tokens (cl100k_base)" in done.stdout
    before, after = read_prompts(SAMPLE), read_prompts(out)
    assert [p.lang for p in after] == [p.lang for p in before]
    assert any("### " in t for p in after for t in p.texts)  # markdown kept
    assert not any("\n\n\n" in t for p in after for t in p.texts)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["analyse", "missing.jsonl"], "FILE: no such file"),
        (["analyse", "{bad}", "--tokenizer", "gpt-17"], "--tokenizer: unknown tokenizer"),
        (["analyse", "{bad}"], "bad.jsonl:2: not JSON"),
        (["analyse", "{chat}"], "chat.jsonl:1 messages[1].content: expected a string"),
        (["normalise", "{chat}", "-o", "x.jsonl", "--keep", "emoji"], "--keep: unknown rule"),
    ],
)
def test_bad_input_exits_2_naming_it(tmp_path: Path, args: list[str], named: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": \n', encoding="utf-8")
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"messages": [{"content": "a"}, {"content": 3}]}) + "\n")
    args = [a.format(bad=bad, chat=chat) for a in args]
    done = ramplab(["prompts", *args], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in done.stderr
    assert "Traceback" not in done.stderr

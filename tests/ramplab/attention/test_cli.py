"""`ramplab attention` as a real process: one real run (JSON, chart), and bad input → exit 2.

Bad input is refused before the model loads (a context beyond the window too: the window is read
from config.json), so those processes stay short."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import ramplab


@pytest.mark.slow
def test_a_small_run_prints_json_and_writes_the_chart(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = ramplab(["attention", "--depths", "0,100", "--context-tokens", "40", "--json",
                    "-o", str(out)])  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["model"] == "all-MiniLM-L6-v2"
    assert (doc["window"], doc["causal"], doc["context_tokens"]) == (512, False, 40)
    assert [d["depth"] for d in doc["depths"]] == [0, 100]
    for depth in doc["depths"]:
        assert len(depth["relevance"]) == len(depth["distance"]) == 40
        assert depth["distance"][depth["answer_index"]] == 0
    assert json.loads((out / "attention.json").read_text()) == doc
    page = (out / "attention.html").read_text()
    assert 'data-chart="attention"' in page
    assert "<script src=" not in page  # plotly.js inlined: it opens offline


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--depths", "0,150"], "--depths: 150 is out of range"),
        (["--model", "{tmp}"], "--model: '{tmp}' is not a Hugging Face model directory"),
        (["--context-tokens", "513"], "--context-tokens: 513 tokens is beyond the model's window"),
    ],
)
def test_bad_input_exits_2_naming_it(tmp_path: Path, args: list[str], named: str) -> None:
    done = ramplab(["attention", *[a.format(tmp=tmp_path) for a in args]])
    assert done.returncode == 2
    assert f"ramplab: error: {named.format(tmp=tmp_path)}" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_the_extra_the_error_says_how_to_install_it(tmp_path: Path) -> None:
    # A `torch` that cannot be imported, first on the path: what a venv without the extra sees.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = ramplab(["attention"], env=env)
    assert done.returncode == 2
    assert "--model: `ramplab attention` needs torch" in done.stderr
    assert "pip install 'ramplab[attention]'" in done.stderr

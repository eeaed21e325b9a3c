"""``ramplab run`` with a real tokenizer named: prompts of the campaign's size in its tokens, and
the run reporting requested against served prompt tokens.

The reference target counts with the same trained byte-level BPE (``APP_TOKENIZER``). It has no
chat template: it joins the messages' texts with a newline and counts that (``wire.py``,
``prompt_text``). Under a byte-level BPE the newline is a piece of its own and the user message's
first word, after it, is one token as it is alone (``token_words.py`` keeps only such words). So
a request of an L-token shared prefix and an N-token question is asked as L + N tokens and served
as exactly L + N + 1: the one token is the join, the server's own addition — what a chat template
adds on an engine, a few tokens a message. Without the tokenizer named, the same campaign's
four-letter words are not one token each under this BPE and served would be far from L + N.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from ramplab.workload.prompts import SyntheticPrompts
from ramplab.workload.tokenizers import load_tokenizer
from tests.support.cli import ramplab, records
from tests.support.processes import TargetProcess

pytestmark = pytest.mark.slow

L, N = 48, 100
CAMPAIGN = """\
name: token-sized
shape: {{kind: stepped, rates: [4], hold: 4s, warmup: 0s}}
seed: 3
max_users: 20
drain_s: 10
workload:
  tokenizer: {model}
  prompt_tokens: {n}
  shared_prefix: {{prefixes: 2, prefix_tokens: {l}, requests_per_prefix: 3}}
  max_tokens: 4
  ignore_eos: true
stack: {{workers: 1}}
"""


@pytest.fixture(scope="module")
def target(bpe_model: Path) -> Iterator[TargetProcess]:
    env = {
        "APP_TOKENIZER": str(bpe_model / "tokenizer.json"),
        "APP_LATENCY__ITL_MS": "2",
        "APP_LATENCY__PREFILL_OVERHEAD_MS": "2",
    }
    with TargetProcess(env) as process:
        yield process


def test_prompts_are_sized_in_the_named_tokenizer_and_served_as_the_target_counts(
    tmp_path: Path, target: TargetProcess, bpe_model: Path
) -> None:
    campaign = tmp_path / "token-sized.yaml"
    campaign.write_text(CAMPAIGN.format(model=bpe_model, n=N, l=L))
    done = ramplab(["run", str(campaign), "--target", target.url, "--results-dir",
                    str(tmp_path), "--run-name", "sized"])  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "sized"
    rows = records(run_dir)
    ok = [r for r in rows if r["ok"]]
    assert len(ok) == len(rows) >= 10
    assert {r["requested_prompt_tokens"] for r in rows} == {L + N}
    assert {r["prompt_tokens"] for r in ok} == {L + N + 1}  # the newline the target joins with
    summary = json.loads((run_dir / "summary.json").read_text())
    for step in summary["steps"]:
        assert step["prompt_tokens_requested"] == L + N
        assert step["prompt_tokens_served"] == L + N + 1
    assert (summary["prompt_tokens_requested"], summary["prompt_tokens_served"]) == (
        L + N,
        L + N + 1,
    )
    report = (run_dir / "report.md").read_text()
    assert "prompt tokens mean (requested / served)" in report
    assert f"{L + N:.1f} / {L + N + 1:.1f}" in report
    # What the campaign would have sent without the tokenizer: approx's words cost more here.
    bpe = load_tokenizer(str(bpe_model))
    words = SyntheticPrompts(N, 0, random.Random(1)).next()[0]["content"]
    assert bpe.count(words) > N

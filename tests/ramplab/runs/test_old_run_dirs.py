"""A run directory written before the columnar records (``requests.jsonl``) rebuilds with the
figures that version itself computed from it.

``jsonl-run/`` is a real run of the commit before the columnar records (a2bba04: ``ramplab run
--rates 10,20 --step 8s --warmup 2s --max-tokens 16`` on loopback): its records as written
(gzipped here), its campaign and progress snapshot, and the summary that version's own rebuild
made of them. Every figure is equal; a ``mean`` may differ in its last bit (it summed each array
pairwise in one piece, the columnar summary sums batch by batch). A figure added since is not in
that summary: ``prompt_tokens_served`` is the mean of the records' ``usage.prompt_tokens`` (128,
what the reference target counted of 128-word prompts), ``prompt_tokens_requested`` stays null
(the records did not say what size was asked for).
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path
from typing import Any

from ramplab.runs.rebuild import rebuild_summary

OLD = Path(__file__).with_name("jsonl-run")


def differences(new: Any, old: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(new, dict) and isinstance(old, dict):
        return [d for key in sorted(set(new) | set(old))
                for d in differences(new.get(key), old.get(key), f"{path}.{key}")]  # fmt: skip
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [d for i, (a, b) in enumerate(zip(new, old, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]  # fmt: skip
    return [] if new == old else [(path, new, old)]


def test_a_jsonl_run_directory_rebuilds_with_its_own_figures(tmp_path: Path) -> None:
    run = tmp_path / "old"
    shutil.copytree(OLD, run)
    with gzip.open(run / "requests.jsonl.gz") as packed:
        (run / "requests.jsonl").write_bytes(packed.read())
    (run / "requests.jsonl.gz").unlink()
    old = json.loads((run / "summary.rebuilt-from-jsonl.json").read_text())
    new = rebuild_summary(run).to_json()
    assert new["requests"] == old["requests"] > 100
    remaining = differences(new, old)
    added = [(path, mine) for path, mine, theirs in remaining if path.endswith("_served")]
    assert {path for path, _ in added} == {".prompt_tokens_served"} | {
        f".steps[{i}].prompt_tokens_served" for i in range(len(new["steps"]))
    }
    assert {mine for _, mine in added} == {128.0}
    assert new["prompt_tokens_requested"] is None
    for path, mine, theirs in remaining:
        if path.endswith("_served"):
            continue
        assert path.endswith(".mean"), (path, mine, theirs)
        assert math.isclose(mine, theirs, rel_tol=1e-15), (path, mine, theirs)

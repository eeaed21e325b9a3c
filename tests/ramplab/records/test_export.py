"""``ramplab export``: every record out, in each format, read back equal; bad input exits 2."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ramplab.records.files import RecordFiles, scan_jsonl
from ramplab.records.schema import batch_of
from ramplab.runs.rundir import RunDir
from tests.ramplab.results.test_columnar import generated


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory written by the master's own writer, then finalised to Parquet."""
    path = tmp_path_factory.mktemp("run")
    writer = RunDir(path).open_writer()
    records = generated(11, 500)
    for record in records[:100]:
        writer.write(record)
    writer.write_batch(batch_of(records[100:]).serialize().to_pybytes(), 400)
    writer.finalize()
    return path


def ramplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ramplab", "export", *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_jsonl_is_the_old_records_file_line_for_line(run_dir: Path, tmp_path: Path) -> None:
    done = ramplab(str(run_dir), "--format", "jsonl", "-o", str(tmp_path / "r.jsonl"))
    assert done.returncode == 0, done.stderr
    exported = list(scan_jsonl(tmp_path / "r.jsonl"))
    assert exported == list(RecordFiles.in_dir(run_dir).records())
    assert len(exported) == 500


def test_parquet_and_csv_hold_every_record(run_dir: Path, tmp_path: Path) -> None:
    assert (
        ramplab(str(run_dir), "--format", "parquet", "-o", str(tmp_path / "r.parquet")).returncode
        == 0
    )
    assert pq.read_table(tmp_path / "r.parquet").equals(pq.read_table(run_dir / "requests.parquet"))
    assert ramplab(str(run_dir), "--format", "csv", "-o", str(tmp_path / "r.csv")).returncode == 0
    with (tmp_path / "r.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    records = list(RecordFiles.in_dir(run_dir).records())
    assert [row["request_id"] for row in rows] == [r.request_id for r in records]
    assert [json.loads(row["itl_ms"]) for row in rows] == [r.itl_ms for r in records]


def test_bad_input_exits_2_naming_it(run_dir: Path, tmp_path: Path) -> None:
    missing = ramplab(str(tmp_path / "nothing"))
    assert missing.returncode == 2
    assert "RUN_DIR" in missing.stderr
    assert "Traceback" not in missing.stderr
    over = ramplab(str(run_dir), "--format", "parquet")
    assert over.returncode == 2
    assert "--output" in over.stderr
    assert (run_dir / "requests.parquet").is_file()

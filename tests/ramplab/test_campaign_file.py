"""Campaign files the CLI cannot read: exit 2 naming the file, never a traceback.

(Beside tests/stack/test_cli_errors.py, which another branch is editing; merge them later.)
"""

from __future__ import annotations

from pathlib import Path

from tests.stack.support import ramplab


def test_a_campaign_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    # Regression: a Latin-1 or UTF-16 file raised UnicodeDecodeError out of `ramplab validate`.
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\nshape: '1@2s'\n".encode("latin-1"))
    for command in ("validate", "run"):
        done = ramplab(
            [command, str(path), *(["--results-dir", str(tmp_path)] * (command == "run"))]
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "latin1.yaml: not UTF-8" in done.stderr
        assert "Traceback" not in done.stdout + done.stderr

"""The wheel, installed (not editable) into a fresh venv, runs the smoke campaign from a directory
that is not the repository: the campaigns, the locustfile and the Prometheus rules are package
data (``ramplab/data``), found with importlib.resources, never through a repository path.

To stay well under a minute on a loaded 2-core machine the fresh venv gets ramplab from the wheel
for real (``pip --python VENV install --no-deps``) and sees the dependencies of the development
venv through a ``.pth`` line (installing numpy, scipy & co. again takes ~2 minutes); a ``.pth``
inside an added directory is not processed, so the development venv's editable ramplab stays
invisible, which the test checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.support.processes import REPO

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]  # one wheel for both tests

DATA = REPO / "ramplab" / "data"


def shipped_files() -> set[str]:
    """Every file ramplab/data links to, as the wheel must name it; grafana/secrets/ (the compose
    stack's local admin password) never."""
    found = set()
    for link in ("campaigns", "locustfiles", "prometheus", "grafana"):
        for path in (DATA / link).rglob("*"):
            if path.is_file() and not {"__pycache__", "secrets"} & set(path.parts):
                found.add(f"ramplab/data/{link}/{path.relative_to(DATA / link).as_posix()}")
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with ramplab installed from a wheel built now; its bin/ directory."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(work / "dist"), str(REPO)],
        check=True, timeout=240, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = (work / "dist").glob("ramplab-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        missing = shipped_files() - set(archive.namelist())
    assert not missing, f"not in the wheel: {sorted(missing)}"
    with zipfile.ZipFile(wheel) as archive:
        assert not [name for name in archive.namelist() if "/secrets/" in name]
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
         str(wheel)],
        check=True, timeout=240, capture_output=True, text=True,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    Path(site, "dev-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return env_dir / "bin"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_wheel_runs_the_smoke_campaign_from_any_directory(
    installed: Path, tmp_path: Path
) -> None:
    where = subprocess.run(
        [str(installed / "python"), "-c", "import ramplab, target_service; "
         "print(ramplab.__file__); print(target_service.__file__)"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    assert all(path.startswith(str(installed.parent)) for path in where), where
    # `campaigns/smoke.yaml` does not exist here: the shipped campaign of that name runs.
    done = subprocess.run(
        [str(installed / "ramplab"), "run", "campaigns/smoke.yaml", "--workers", "1",
         "--run-name", "smoke", "--results-dir", "out"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "out" / "smoke"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["locustfile"].startswith(str(installed.parent)), meta["locustfile"]
    assert meta["campaign"].startswith(str(installed.parent)), meta["campaign"]
    assert (run_dir / "report.html").is_file()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] > 0


def test_the_installed_cli_lists_and_finds_shipped_campaigns(
    installed: Path, tmp_path: Path
) -> None:
    listed = subprocess.run(
        [str(installed / "ramplab"), "campaigns"], cwd=tmp_path, env={**clean_env(),
        "COLUMNS": "300"}, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    for name in ("demo", "smoke", "itl"):
        assert f"│ {name} " in listed
    validated = subprocess.run(
        [str(installed / "ramplab"), "validate", "demo"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert validated.returncode == 0, validated.stderr
    assert "ok — demo" in validated.stdout
    rules = subprocess.run(
        [str(installed / "python"), "-c", "from ramplab.metrics.promconfig import "
         "shipped_rule_files; print(len(shipped_rule_files()))"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert int(rules) == len(list((REPO / "prometheus" / "rules").glob("*.yml")))

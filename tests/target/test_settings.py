"""Settings: the file, APP_* overrides, validation that names the key, masked printing."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest
from pydantic import SecretStr

from target_service.errors import SettingsError
from target_service.settings import Settings, load_settings
from tests.support.processes import REPO


@pytest.fixture
def app_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.startswith("APP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("APP_CONFIG_FILE", str(REPO / "configs" / "app.toml"))
    return monkeypatch


def _unwrap(value: object) -> object:
    """Secrets compared by value: the file holds them in the clear (demo credentials)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def test_code_defaults_equal_the_shipped_file(app_env: pytest.MonkeyPatch) -> None:
    app_env.delenv("APP_CONFIG_FILE")
    app_env.chdir(REPO / "tests")  # no configs/app.toml here: code defaults only
    from_code = _unwrap(Settings().model_dump())
    with (REPO / "configs" / "app.toml").open("rb") as handle:
        from_file = tomllib.load(handle)
    for key, value in from_file.items():
        if isinstance(value, dict):
            for inner, inner_value in value.items():
                assert from_code[key][inner] == inner_value, f"{key}.{inner}"
        else:
            assert from_code[key] == value, key


def test_environment_overrides_file(app_env: pytest.MonkeyPatch) -> None:
    app_env.setenv("APP_SCHEDULER__MAX_NUM_SEQS", "7")
    app_env.setenv("APP_STREAM__CHUNK_SIZE", "4")
    app_env.setenv("APP_MODELS", '["a", "b"]')
    settings = load_settings()
    assert settings.scheduler.max_num_seqs == 7
    assert settings.stream.chunk_size == 4
    assert settings.models == ["a", "b"]


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("APP_SCHEDULER__MAX_NUM_SEQS", "0", "scheduler.max_num_seqs"),
        ("APP_SCHEDULER__KIND", "fifo", "scheduler.kind"),
        ("APP_PORT", "http", "port"),
        ("APP_REDIS_URL", "localhost:6379", "redis_url"),
    ],
)
def test_invalid_settings_name_key_and_value(
    app_env: pytest.MonkeyPatch, key: str, value: str, named: str
) -> None:
    app_env.setenv(key, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert named in str(info.value)
    assert value in str(info.value)


def test_invalid_settings_stop_start_up_with_exit_2() -> None:
    env = {**os.environ, "APP_LATENCY__ITL_MS": "-5"}
    done = subprocess.run(
        [sys.executable, "-m", "target_service", "--port", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "latency.itl_ms='-5'" in done.stderr
    assert "APP_LATENCY__ITL_MS" in done.stderr
    assert "Traceback" not in done.stderr


def test_secrets_are_masked(app_env: pytest.MonkeyPatch) -> None:
    app_env.setenv("APP_ADMIN_TOKEN", "s3cret-admin")
    app_env.setenv("APP_REDIS_URL", "redis://user:pa55@127.0.0.1:6379/0")
    printed = str(load_settings().masked())
    assert "s3cret-admin" not in printed
    assert "pa55" not in printed
    assert "127.0.0.1:6379/0" in printed

"""A Prometheus configuration for the local stack: static loopback targets, the shipped rules.

The compose stack uses ``prometheus/prometheus.yml`` (DNS discovery of the workers); the local
stack runs every process on 127.0.0.1 with its own port, so it gets a generated file with static
targets instead::

    text = local_config([("target", "127.0.0.1:8000"), ("worker", "127.0.0.1:9101")],
                        rule_files=shipped_rule_files())
    # prometheus --config.file=PATH --storage.tsdb.path=DIR --web.listen-address=127.0.0.1:PORT
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from ramplab.data import prometheus_dir
from ramplab.errors import PromConfigError

SHIPPED_RULES = prometheus_dir() / "rules"
LOOPBACK_NAMES = frozenset({"localhost"})


def shipped_rule_files(rules_dir: Path = SHIPPED_RULES) -> list[Path]:
    """The rule files ramplab ships (package data: ``ramplab/data/prometheus/rules``)."""
    return sorted(rules_dir.glob("*.yml")) if rules_dir.is_dir() else []


def _check_target(job: str, address: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise PromConfigError(f"target {address!r} of job {job!r}: expected host:port")
    host = host.strip("[]")
    if host in LOOPBACK_NAMES:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise PromConfigError(
            f"target {address!r} of job {job!r}: the local stack scrapes loopback only"
        )


def local_config(
    targets: Iterable[tuple[str, str]],
    *,
    rule_files: Sequence[Path] = (),
    scrape_interval_s: float = 2.0,
    external_labels: dict[str, str] | None = None,
) -> str:
    """Prometheus YAML scraping ``(job, "127.0.0.1:port")`` targets, one scrape job per name.

    Raises :class:`PromConfigError` for a target that is not ``host:port`` on loopback.
    """
    if scrape_interval_s <= 0:
        raise PromConfigError(f"scrape_interval_s={scrape_interval_s!r}: must be positive")
    jobs: dict[str, list[str]] = {}
    for job, address in targets:
        if not job or not job.replace("_", "").replace("-", "").isalnum():
            raise PromConfigError(f"job name {job!r}: letters, digits, '_' and '-' only")
        _check_target(job, address)
        jobs.setdefault(job, []).append(address)
    if not jobs:
        raise PromConfigError("no targets: the local stack has nothing to scrape")
    interval = f"{round(scrape_interval_s * 1000)}ms"
    # The scrape must finish before the next one starts.
    timeout = f"{max(round(scrape_interval_s * 800), 100)}ms"
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": timeout,
            "evaluation_interval": interval,
            "external_labels": {"stack": "local", **(external_labels or {})},
        },
        "rule_files": [str(Path(path).resolve()) for path in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": addresses}]}
            for job, addresses in jobs.items()
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_local_config(path: Path, targets: Iterable[tuple[str, str]], **options: Any) -> Path:
    """Write :func:`local_config` to ``path`` and return it."""
    path.write_text(local_config(targets, **options))
    return path

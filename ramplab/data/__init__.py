"""The files ramplab reads at run time, shipped inside the package (importlib.resources).

    campaigns/      the shipped campaigns (``ramplab run demo`` finds ``campaigns/demo.yaml``)
    locustfiles/    ``llm_ramp.py`` (what ``ramplab run`` starts) and ``llm_stream.py``
    prometheus/     the compose stack's ``prometheus.yml`` and the rules every Prometheus loads
    grafana/        the dashboards and their provisioning files

In a checkout each of these is a symbolic link to the repository's top-level folder of the same
name, so there is one copy of every file: users and tests keep the paths they know
(``campaigns/demo.yaml``), and the wheel holds the files themselves (setuptools copies what the
links point to). An installed ramplab therefore runs from any directory, and nothing here
resolves a path against the repository.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["campaign", "campaigns", "data_dir", "grafana_dir", "locustfile", "prometheus_dir"]


def data_dir() -> Path:
    """The folder of the shipped files (a real directory: Locust and Prometheus read paths)."""
    root = files(__name__)
    if not isinstance(root, Path):  # a zip import: there is no file Locust could be handed
        raise RuntimeError(f"ramplab's data is not on a file system ({root}); install it unzipped")
    return root


def locustfile(name: str = "llm_ramp.py") -> Path:
    """A shipped locustfile; ``llm_ramp.py`` is the one ``ramplab run`` starts."""
    return data_dir() / "locustfiles" / name


def prometheus_dir() -> Path:
    """``prometheus.yml`` (the compose stack's) and ``rules/*.yml``."""
    return data_dir() / "prometheus"


def grafana_dir() -> Path:
    """``dashboards/*.json`` and ``provisioning/``."""
    return data_dir() / "grafana"


def campaigns() -> list[Path]:
    """The shipped campaign files, by name."""
    return sorted((data_dir() / "campaigns").glob("*.yaml"))


def campaign(name: str | Path) -> Path | None:
    """The shipped campaign ``name`` names: ``demo``, ``demo.yaml`` or ``campaigns/demo.yaml``
    (the path the README uses, so that it works from any directory); ``None`` if there is none.
    """
    given = Path(name)
    if given.is_absolute() or len(given.parts) > 2:
        return None
    if len(given.parts) == 2 and given.parts[0] != "campaigns":
        return None
    stem = given.name.removesuffix(".yaml").removesuffix(".yml")
    found = data_dir() / "campaigns" / f"{stem}.yaml"
    return found if found.is_file() else None

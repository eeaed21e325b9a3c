"""Variants of a campaign: a cartesian ``matrix`` and/or named ``variants``, expanded and validated.

::

    name: signing
    shape: {kind: stepped, rates: [20, 40], hold: 10s, warmup: 2s}
    matrix:                                    # every combination of the lists
      target.settings.signing.mode: [locked, parallel, ed25519]
      workload: {chunk_size: [1, 16]}          # nested or dotted keys, the same thing
    variants:                                  # named sets of overrides that go together
      - {name: light, target.settings.signing.work_factor: 1}
      - {name: heavy, target: {settings: {signing: {work_factor: 8}}}}
    repeat: 3                                  # every variant runs 3 times
    order: shuffled                            # shuffled (default) | abba | fixed
    baseline: light+mode=locked+chunk_size=1   # compare's reference (default: the first)
    fail_if: ["ttft_ms.p99 > 1.1 * baseline"]  # the experiment exits 3 when one holds

With both, every named variant runs at every matrix combination (here 2 × 3 × 2 = 12 variants);
with one of them, its entries are the variants. A key names a campaign field by its dotted path;
nested mappings are followed through the campaign's sections (``workload``, ``workload.auth``,
``stack``, ``target``, and ``target.settings`` down to any depth), so a mapping-valued field
(``retry``, ``slo``, ``shape``, ``workload.extra_body``) is replaced whole, never merged. Varying
``shape`` drops the base's ``steps`` and the reverse.

Each variant is validated as the complete campaign it becomes — its fields, its files and
credentials, its gates and (``check_target``) the reference target's own check of its settings —
before anything runs, and an error names the path in the file that caused it:
``matrix.workload.chunk_size[2]``, ``variants[1].retry.max_attempts``, or a base field when the
base is wrong whatever the variant.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ramplab.campaign import preflight
from ramplab.campaign.schema import (
    EXPERIMENT_KEYS,
    NAME_RULE,
    Campaign,
    is_valid_name,
    parse_campaign,
    read_campaign_data,
    resolve_files,
)
from ramplab.campaign.studies import check_study
from ramplab.errors import CampaignError, UsageError
from ramplab.experiment.expr import parse_conditions

__all__ = [
    "MAX_RUNS",
    "ORDERS",
    "Experiment",
    "Order",
    "Override",
    "Variant",
    "has_variants",
    "load_experiment",
    "parse_experiment",
]

Order = Literal["shuffled", "abba", "fixed"]
ORDERS: tuple[Order, ...] = ("shuffled", "abba", "fixed")
MAX_RUNS = 500  # variants × repeat; a typo in a matrix should not plan a week of runs
MAX_REPEAT = 100
# Campaign sections whose keys are followed when an override is written as a nested mapping.
_SECTIONS = ("workload", "workload.auth", "stack", "target", "target.settings")
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
# The target's --check message: "invalid settings: signing.mode='lockd' (env ...): ..."
_TARGET_KEY = re.compile(r"([A-Za-z_][\w.]*)=")


@dataclass(frozen=True, slots=True)
class Override:
    """One campaign field set by a variant: ``path`` in the campaign, ``source`` in the file."""

    path: str
    value: Any
    source: str


@dataclass(frozen=True, slots=True)
class Variant:
    """One expanded variant: its overrides and the campaign it is (validated)."""

    name: str
    slug: str  # the name as a run directory component
    overrides: tuple[Override, ...]
    campaign: Campaign
    data: Mapping[str, Any]  # the campaign as YAML data: what each of its runs saves

    def overrides_dict(self) -> dict[str, Any]:
        return {o.path: o.value for o in self.overrides}


@dataclass(frozen=True, slots=True)
class Experiment:
    """A campaign with variants, expanded; ``variants`` in the order the file declares them."""

    name: str
    seed: int
    variants: tuple[Variant, ...]
    repeat: int
    order: Order
    baseline: str
    fail_if: tuple[str, ...]
    study: str | None = None  # the analysis run on the finished experiment (ramplab.study)

    @property
    def runs(self) -> int:
        return len(self.variants) * self.repeat

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)


@dataclass(frozen=True, slots=True)
class _Dimension:
    path: str
    source: str
    values: tuple[Any, ...]


def has_variants(data: object) -> bool:
    """True when parsed campaign YAML is an experiment (has any of ``EXPERIMENT_KEYS``)."""
    return isinstance(data, Mapping) and any(key in data for key in EXPERIMENT_KEYS)


def _is_section(path: str) -> bool:
    return path in _SECTIONS or path.startswith("target.settings.")


def _walk(raw: Mapping[Any, Any], prefix: str, source: str) -> Iterator[tuple[str, str, Any]]:
    """(campaign path, path in the file, value) of every leaf, following sections."""
    for key, value in raw.items():
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise CampaignError(source, f"bad field name {key!r}")
        path = f"{prefix}.{key}" if prefix else key
        where = f"{source}.{key}"
        if isinstance(value, Mapping) and _is_section(path):
            yield from _walk(value, path, where)
        else:
            yield path, where, value


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _dimensions(raw: object) -> list[_Dimension]:
    if not isinstance(raw, Mapping) or not raw:
        raise CampaignError("matrix", "expected a mapping of FIELD: [values, ...]")
    dims: list[_Dimension] = []
    for path, where, value in _walk(raw, "", "matrix"):
        if not isinstance(value, list) or not value:
            raise CampaignError(where, f"expected a non-empty list of values, got {value!r}")
        for other in dims:
            if _overlap(path, other.path):
                raise CampaignError(where, f"also varied by {other.source}")
        dims.append(_Dimension(path, where, tuple(value)))
    return dims


def _named(raw: object) -> list[tuple[str, str, list[Override]]]:
    """(name, path in the file, overrides) of the ``variants`` section (a list or a mapping)."""
    if isinstance(raw, Mapping):
        items = [
            (f"variants.{k}", {"name": k, **(v if isinstance(v, Mapping) else {"": v})})
            for k, v in raw.items()
        ]
    elif isinstance(raw, list) and raw:
        items = [(f"variants[{i}]", v) for i, v in enumerate(raw)]
    else:
        raise CampaignError("variants", "expected a list of {name: ..., FIELD: value, ...}")
    out: list[tuple[str, str, list[Override]]] = []
    for where, entry in items:
        if not isinstance(entry, Mapping) or "" in entry:
            raise CampaignError(where, "expected a mapping of FIELD: value with a name")
        name = entry.get("name")
        if not isinstance(name, str) or not is_valid_name(name):
            raise CampaignError(f"{where}.name", f"{name!r}: {NAME_RULE}")
        if any(name == seen for seen, _, _ in out):
            raise CampaignError(f"{where}.name", f"{name!r} is named twice")
        rest = {k: v for k, v in entry.items() if k != "name"}
        overrides: list[Override] = []
        for path, field, value in _walk(rest, "", where):
            if any(_overlap(path, o.path) for o in overrides):
                raise CampaignError(field, "set twice in this variant")
            overrides.append(Override(path, value, field))
        out.append((name, where, overrides))
    return out


def _text(value: Any, index: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float) or value is None:
        return "null" if value is None else str(value)
    return f"#{index + 1}"  # a mapping or list: its position in the matrix list


def _labels(dims: list[_Dimension]) -> list[str]:
    last = [d.path.rsplit(".", 1)[-1] for d in dims]
    return [name if last.count(name) == 1 else d.path for name, d in zip(last, dims, strict=True)]


def _apply(base: Mapping[str, Any], overrides: tuple[Override, ...]) -> dict[str, Any]:
    data = copy.deepcopy(dict(base))
    for o in overrides:
        parts = o.path.split(".")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise CampaignError(o.source, f"{part!r} is not a mapping in the campaign")
            node = child
        node[parts[-1]] = copy.deepcopy(o.value)
        # The two forms of the load are exclusive: setting one replaces the other.
        if o.path == "shape":
            data.pop("steps", None)
        elif o.path == "steps":
            data.pop("shape", None)
    return data


def _blame(error: UsageError, overrides: tuple[Override, ...]) -> CampaignError:
    """The error on the path in the file that set the field (the base's own path otherwise)."""
    field = error.field
    reason = str(error).removeprefix(f"{field}: ")
    if field == "target.settings" and (m := _TARGET_KEY.search(reason)) is not None:
        field = f"target.settings.{m.group(1)}"
    for o in overrides:
        if field == o.path:
            return CampaignError(o.source, reason)
        if field.startswith((o.path + ".", o.path + "[")):
            return CampaignError(o.source + field[len(o.path) :], reason)
        if o.path.startswith(field + "."):
            return CampaignError(o.source, reason)
    return CampaignError(error.field, reason)


def _int(data: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CampaignError(key, f"expected a whole number from {low} to {high}, got {value!r}")
    return value


def _variants(data: Mapping[str, Any]) -> list[tuple[str, tuple[Override, ...]]]:
    dims = _dimensions(data["matrix"]) if "matrix" in data else []
    named = _named(data["variants"]) if "variants" in data else [("", "", [])]
    if not dims and named == [("", "", [])]:
        raise CampaignError("matrix", "an experiment needs a 'matrix' or 'variants'")
    for o in [o for _, _, overrides in named for o in overrides] + [
        Override(d.path, None, d.source) for d in dims
    ]:
        if o.path == "name":
            raise CampaignError(o.source, "the experiment's name cannot vary (it names the dir)")
    for _, _, overrides in named:
        for o in overrides:
            for d in dims:
                if _overlap(o.path, d.path):
                    raise CampaignError(o.source, f"also varied by {d.source}")
    labels = _labels(dims)
    out = []
    for name, _, overrides in named:
        for combo in itertools.product(*(range(len(d.values)) for d in dims)):
            parts = [name] if name else []
            parts += [
                f"{label}={_text(d.values[i], i)}"
                for label, d, i in zip(labels, dims, combo, strict=True)
            ]
            chosen = [
                Override(d.path, d.values[i], f"{d.source}[{i}]")
                for d, i in zip(dims, combo, strict=True)
            ]
            out.append(("+".join(parts), (*overrides, *chosen)))
    return out


def _slugs(names: list[str]) -> list[str]:
    slugs: list[str] = []
    for name in names:
        slug = _SLUG.sub("-", name).strip("-.") or "variant"
        while slug in slugs:
            slug += "_"
        slugs.append(slug)
    return slugs


def parse_experiment(
    data: Mapping[str, Any],
    source: str = "campaign",
    base_dir: Path | None = None,
    *,
    check_target: bool = True,
) -> Experiment:
    """Expand and validate every variant; ``CampaignError`` names the first bad path."""
    base = {k: v for k, v in data.items() if k not in EXPERIMENT_KEYS}
    repeat = _int(data, "repeat", 1, 1, MAX_REPEAT)
    order = data.get("order", "shuffled")
    if order not in ORDERS:
        raise CampaignError("order", f"expected one of {', '.join(ORDERS)}, got {order!r}")
    fail_if = data.get("fail_if", [])
    if not isinstance(fail_if, list) or not all(isinstance(t, str) for t in fail_if):
        raise CampaignError("fail_if", "expected a list of conditions (strings)")
    expanded = _variants(data)
    if len(expanded) * repeat > MAX_RUNS:
        raise CampaignError(
            "matrix",
            f"{len(expanded)} variants × repeat {repeat} = "
            f"{len(expanded) * repeat} runs; at most {MAX_RUNS}",
        )
    variants: list[Variant] = []
    checked: dict[str, tuple[Override, ...]] = {}  # target settings already checked
    slugs = _slugs([name for name, _ in expanded])
    for (name, overrides), slug in zip(expanded, slugs, strict=True):
        effective = _apply(base, overrides)
        try:
            campaign = parse_campaign(effective, source)
            if base_dir is not None:
                campaign = resolve_files(campaign, base_dir)
            preflight.check_campaign(campaign)
            key = repr(sorted(campaign.target.environment().items()))
            if check_target and key not in checked:
                preflight.target_check(campaign)
                checked[key] = overrides
        except UsageError as exc:
            raise _blame(exc, overrides) from None
        variants.append(Variant(name, slug, overrides, campaign, effective))
    baseline = data.get("baseline", variants[0].name)
    if baseline not in [v.name for v in variants]:
        names = ", ".join(v.name for v in variants[:8])
        raise CampaignError("baseline", f"{baseline!r} is not a variant (variants: {names})")
    _check_conditions(fail_if)
    study = data.get("study")
    if study is not None:
        try:
            check_study(study)
        except UsageError as exc:
            raise CampaignError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
    return Experiment(
        name=variants[0].campaign.name,
        seed=variants[0].campaign.seed,
        variants=tuple(variants),
        repeat=repeat,
        order=order,
        baseline=baseline,
        fail_if=tuple(fail_if),
        study=study,
    )


def _check_conditions(texts: list[str]) -> None:
    try:
        parse_conditions(texts, field="fail_if")
    except UsageError as exc:
        raise CampaignError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None


def load_experiment(path: Path, *, check_target: bool = True) -> Experiment | None:
    """The experiment of a campaign file, or ``None`` when the file has no variants."""
    data = read_campaign_data(path)
    if not has_variants(data):
        return None
    assert isinstance(data, Mapping)
    return parse_experiment(data, str(path), Path(path).parent, check_target=check_target)

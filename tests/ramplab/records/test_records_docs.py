"""Every column of the records' schema is documented in docs/records.md with its Arrow type, and
nothing else is."""

from __future__ import annotations

import re

import pyarrow as pa

from ramplab.records.schema import SCHEMA, SCHEMA_VERSION, VERSION_KEY
from tests.support.processes import REPO


def spelled(kind: pa.DataType) -> str:
    """A type as the documentation writes it: a list by its items, a struct by its name only
    (its fields have their own rows)."""
    if pa.types.is_list(kind):
        return f"list<{spelled(kind.value_type)}>"
    if pa.types.is_struct(kind):
        return "struct"
    return str(kind)


def columns() -> dict[str, str]:
    """Each column (a struct's fields as ``column.field``) and its type."""
    out: dict[str, str] = {}
    for field in SCHEMA:
        out[field.name] = spelled(field.type)
        inner = field.type.value_type if pa.types.is_list(field.type) else field.type
        if pa.types.is_struct(inner):
            for member in inner:
                out[f"{field.name}.{member.name}"] = spelled(member.type)
    return out


def documented() -> dict[str, str]:
    text = (REPO / "docs" / "records.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `([\w.]+)` \| `([^`]+)` \|", text, flags=re.MULTILINE))


def test_every_column_is_documented_with_its_type() -> None:
    assert columns().items() - documented().items() == set()


def test_the_documentation_names_no_column_that_does_not_exist() -> None:
    assert documented().keys() - columns().keys() == set()


def test_the_documented_version_is_the_schemas() -> None:
    text = (REPO / "docs" / "records.md").read_text(encoding="utf-8")
    assert f"key `{VERSION_KEY.decode()}`, value `{SCHEMA_VERSION}`" in text
    assert SCHEMA.metadata == {VERSION_KEY: str(SCHEMA_VERSION).encode()}

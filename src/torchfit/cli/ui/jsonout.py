"""Every `--json` object torchfit prints, named by its schema.

Each object starts with `"schema": "torchfit.<kind>/<version>"`; the JSON Schema of each kind
is published in docs/schemas/<kind>.schema.json (the tests validate real outputs against them).
The version moves only when a key is removed or changes meaning; added keys keep it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

VERSION = 1


def schema_id(kind: str) -> str:
    """`torchfit.doctor/1`: the value of an object's "schema" key."""
    return f"torchfit.{kind}/{VERSION}"


def with_schema(kind: str, data: Mapping[str, object]) -> dict[str, object]:
    """`data` with its "schema" key first."""
    return {"schema": schema_id(kind), **{k: v for k, v in data.items() if k != "schema"}}


def json_text(kind: str, data: Mapping[str, object], **dumps: Any) -> str:
    """The indented JSON text of `data` as a `kind` object (anything json.dumps takes: a JsonObject,
    a record's TypedDict)."""
    return json.dumps(with_schema(kind, data), indent=2, **dumps)

"""JSON as types: `JsonValue` (any JSON value) and `JsonObject` (an object torchfit writes).

For data that is only passed through to JSON output (a `--json` object, a report, an error's
`details()`): what is built here is dumped, never read back by key. Data that crosses modules
and is read by key has its own shape (a TypedDict such as workers/records.py's, a dataclass),
not this. `Sequence` and `Mapping` (read-only, covariant) so that a `list[str]` or a
`dict[str, int]` is a JSON value as it is; a mapping's values are `object` (mypy holds a
TypedDict, such as a worker's record read back from JSON, to `Mapping[str, object]` only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Union

JsonValue = Union[None, bool, int, float, str, Sequence["JsonValue"], Mapping[str, object]]
JsonObject = dict[str, JsonValue]

__all__ = ["JsonObject", "JsonValue"]

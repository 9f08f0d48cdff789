"""The one TOML writer: pylock.toml, uv's pyproject, the export formats, matrix.toml edits.

The standard library reads TOML (`tomllib`, through `torchfit._backports`) but does
not write it. This is a small writer for the subset torchfit emits: strings,
numbers, booleans, datetimes, arrays, inline tables (`Inline`), tables and arrays of
tables. Every file torchfit writes goes through `toml_value`/`dumps_toml`, so a
string is escaped one way everywhere (tests round-trip it through tomllib).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any


class Inline(dict):  # type: ignore[type-arg]
    """A table written inline (`hashes = { sha256 = "..." }`)."""


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_str(text: str) -> str:
    """A TOML basic string: `a "b"` -> `"a \\"b\\""` (control characters escaped)."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A key, bare when TOML allows it (`lock-version`), quoted otherwise."""
    return key if _BARE_KEY.fullmatch(key) else toml_str(key)


def toml_value(value: object) -> str:
    """One TOML value (strings, numbers, bools, dates, lists, inline tables; None is left out)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("TOML lock values must be finite")
        return repr(value)
    if isinstance(value, str):
        return toml_str(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = [f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def toml_array(values: list[Any], indent: str = "    ") -> str:
    """A multi-line array, one value a line (what people diff): `[\\n    "a",\\n]`."""
    return "[\n" + "".join(f"{indent}{toml_value(v)},\n" for v in values if v is not None) + "]"


def _is_table(value: object) -> bool:
    return isinstance(value, Mapping) and not isinstance(value, Inline)


def _is_table_array(value: object) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_table(v) for v in value)


def dumps_toml(data: Mapping[str, object], *, under: Sequence[str] = ()) -> str:
    """TOML text for `data`: dicts become [tables], lists of dicts [[arrays of tables]].

    None values are left out (TOML has no null). Keys of a table come before its
    sub-tables, as TOML requires. `under`: `data` is the table at that dotted path
    (`("tool", "uv")`), written after text that opened it: its own keys first, then its
    sub-tables as `[tool.uv.sources]`, no header of its own. A value TOML cannot hold is
    TypeError (`toml_value`): the type says "any mapping", the writer checks each value.
    """
    lines: list[str] = []
    _emit(lines, [toml_key(k) for k in under], data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _emit(lines: list[str], path: list[str], table: Mapping[str, object]) -> None:
    for key, value in table.items():
        if value is None or _is_table(value) or _is_table_array(value):
            continue
        lines.append(f"{toml_key(str(key))} = {toml_value(value)}")
    for key, value in table.items():
        sub = [*path, toml_key(str(key))]
        if isinstance(value, Mapping) and not isinstance(value, Inline):
            lines += ["", "[" + ".".join(sub) + "]"]
            _emit(lines, sub, value)
        elif isinstance(value, (list, tuple)) and _is_table_array(value):
            for item in value:
                lines += ["", "[[" + ".".join(sub) + "]]"]
                _emit(lines, sub, item)


def drop_none(value: Any) -> Any:
    """`value` without None anywhere inside (Inline tables stay inline)."""
    if isinstance(value, Mapping):
        cls = Inline if isinstance(value, Inline) else dict
        return cls((k, drop_none(v)) for k, v in value.items() if v is not None)
    if isinstance(value, (list, tuple)):
        return [drop_none(v) for v in value if v is not None]
    return value

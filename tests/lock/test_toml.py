"""The one TOML writer (lock/toml.py): whatever it writes, tomllib reads back the same."""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from torchfit._backports import tomllib
from torchfit.lock.toml import Inline, dumps_toml, toml_str, toml_value

_keys = st.text(min_size=1, max_size=12)
_scalars = st.one_of(st.text(max_size=30), st.integers(-(2**62), 2**62), st.booleans(),
                     st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(_scalars, max_size=4), st.dictionaries(_keys, inner, max_size=4),
                            st.lists(st.dictionaries(_keys, inner, min_size=1, max_size=3), min_size=1, max_size=3)),
    max_leaves=20,
)


def _normal(value: object) -> object:
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=6))
@example({"0": [], "0\n": [{"0": ""}]})  # a key ending in a newline is not a bare key (found by hypothesis)
def test_dumps_toml_round_trips(data: dict[str, object]) -> None:
    assert _normal(tomllib.loads(dumps_toml(data))) == _normal(data)


def test_values_and_strings() -> None:
    assert toml_value([1, "a", None, True]) == '[1, "a", true]'
    assert toml_value(Inline(sha256="ab", other=None)) == '{ sha256 = "ab" }'
    tricky = 'a "b" \\ c\n\x01'
    assert tomllib.loads("k = " + toml_str(tricky))["k"] == tricky
    assert dumps_toml({"a": {"b": [{"c": 1}]}}) == "[a]\n\n[[a.b]]\nc = 1\n"

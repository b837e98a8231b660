"""Hypothesis strategies derived from the codec's own schema declarations."""

from __future__ import annotations

from hypothesis import strategies as st

from broker.protocol import schema as s

_FIXED = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
}
_VAR = {
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=24),
    "records": st.binary(max_size=64),
    "uuid": st.uuids(),
}


def _type_strategy(t, version: int):
    if isinstance(t, list):
        return body(t, version)
    if isinstance(t, s.Array):
        return st.lists(_type_strategy(t.item, version), max_size=3)
    if isinstance(t, s.Struct):
        return body(list(t.fields), version)
    if isinstance(t, s.Fixed):
        return _FIXED[t.name]
    return _VAR[t.name]


def body(fields: list, version: int):
    """Dicts holding exactly the fields present at `version`, with random values."""
    strategies = {}
    for f in fields:
        if not f.exists(version):
            continue
        value = _type_strategy(f.type, version)
        if isinstance(f.type, list):
            value = st.lists(value, max_size=3)
        if f.nullable_at(version):
            value = st.none() | value
        strategies[f.name] = value
    return st.fixed_dictionaries(strategies)


def expected(fields: list, version: int, value: dict) -> dict:
    """What decoding `value` must give: absent-version fields set to their defaults."""
    out = {}
    for f in fields:
        if not f.exists(version):
            out[f.name] = f.default_value()
        elif isinstance(f.type, list) and value[f.name] is not None:
            out[f.name] = [expected(f.type, version, item) for item in value[f.name]]
        elif isinstance(f.type, s.Struct) and value[f.name] is not None:
            out[f.name] = expected(list(f.type.fields), version, value[f.name])
        else:
            out[f.name] = value[f.name]
    return out


def plain(value):
    """Decoded body with memoryviews turned into bytes, for equality checks."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value

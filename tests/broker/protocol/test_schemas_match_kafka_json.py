"""Our declarations match Kafka's message JSON (as bundled with kafka-python).

For every API at every supported version: the same fields in the same order, with
snake_case names, the same types and nullability, the same numeric/bool defaults, the
same tagged fields with the same tags, and the same first flexible version.
"""

from __future__ import annotations

import re

import pytest
from kafka.protocol.schemas.load_json import load_json

from broker.protocol import schema as s
from broker.protocol.registry import SCHEMAS
from tests.broker.protocol.test_kafka_python import NOT_IN_KAFKA_PYTHON


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def in_range(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= version <= int(hi or lo)


def first_version(spec: str) -> int | None:
    return None if spec == "none" else int(re.match(r"\d+", spec).group())


def type_name(t) -> str:
    if isinstance(t, list):
        return "[]struct"
    if isinstance(t, s.Array):
        return "[]" + t.item.name
    if isinstance(t, s.Struct):
        return "struct"
    return t.name


PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "string",
    "bytes", "records", "uuid",
}  # fmt: skip


def json_type(field: dict) -> str:
    t = field["type"]
    if t.startswith("[]") and t[2:3].isupper():
        return "[]struct"
    if t not in PRIMITIVES and not t.startswith("[]"):
        return "struct"
    return t


def struct_fields(field: dict, common: dict) -> list:
    if "fields" in field:
        return field["fields"]
    return common[field["type"].removeprefix("[]")]


def compare(ours: list, theirs: list, version: int, path: str, common: dict) -> None:
    kafka_fields = [f for f in theirs if in_range(f["versions"], version)]
    our_fields = [f for f in ours if f.exists(version)]
    assert [f.name for f in our_fields] == [snake(f["name"]) for f in kafka_fields], path
    for mine, kafka in zip(our_fields, kafka_fields, strict=True):
        where = f"{path}.{mine.name} v{version}"
        tagged = in_range(kafka.get("taggedVersions"), version)
        assert mine.tag == (kafka["tag"] if tagged else None), where
        assert type_name(mine.type) == json_type(kafka), where
        assert mine.nullable_at(version) == in_range(kafka.get("nullableVersions"), version), where
        default = kafka.get("default")
        if isinstance(mine.type, s.Fixed) and default not in (None, ""):
            expected = {"true": True, "false": False}.get(default, default)
            if isinstance(expected, str):
                expected = int(expected, 0)
            assert mine.default_value() == expected, where
        if isinstance(mine.type, list):
            compare(mine.type, struct_fields(kafka, common), version, where, common)
        if isinstance(mine.type, s.Struct):
            compare(list(mine.type.fields), struct_fields(kafka, common), version, where, common)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    "api_key", [k for k in SCHEMAS if k not in NOT_IN_KAFKA_PYTHON], ids=lambda k: k.name
)
def test_declarations_follow_kafka_json(api_key):
    api = SCHEMAS[api_key]
    base = "".join(w.capitalize() for w in api_key.name.split("_"))
    for suffix, ours in (("Request", api.request), ("Response", api.response)):
        kafka = load_json(base + suffix)
        assert kafka["apiKey"] == api_key
        assert in_range(kafka["validVersions"], api.max_version)
        assert api.flexible == first_version(kafka["flexibleVersions"])
        common = {c["name"]: c["fields"] for c in kafka.get("commonStructs", [])}
        for version in range(api.min_version, api.max_version + 1):
            compare(ours, kafka["fields"], version, base + suffix, common)

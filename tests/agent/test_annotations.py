"""The one reading of Config annotations (agent/annotations.py) that the compiler and
the reference share."""

import dataclasses
from typing import Any, Literal

from agent.annotations import (
    Anything,
    Choice,
    ListOf,
    MappingOf,
    Nested,
    Null,
    OneOf,
    Scalar,
    config_fields,
    nested_block,
    shape_of,
)
from agent.api import Duration, Size


@dataclasses.dataclass
class Block:
    ca: str | None = None


@dataclasses.dataclass
class Config:
    topic: str
    size: Size = Size(1)
    acks: Literal["all", -1] = "all"
    tls: Block | None = None
    headers: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    derived: int = dataclasses.field(default=0, init=False)


def test_each_kind_of_annotation_has_its_shape():
    assert shape_of(str) == Scalar(str)
    assert shape_of(Duration) == Scalar(Duration)
    assert shape_of(Any) == Anything()
    assert shape_of(Literal["all", -1, 0]) == Choice(("all", -1, 0))
    assert shape_of(list[int]) == ListOf(Scalar(int))
    assert shape_of(dict[str, list[str]]) == MappingOf(Scalar(str), ListOf(Scalar(str)))
    assert shape_of(Block) == Nested(Block)


def test_a_union_keeps_its_order_and_its_null():
    assert shape_of(int | str | None) == OneOf((Scalar(int), Scalar(str), Null()))
    assert shape_of(None | Size) == OneOf((Null(), Scalar(Size)))


def test_a_nested_block_is_a_dataclass_alone_or_with_null():
    assert nested_block(shape_of(Block | None)) is Block
    assert nested_block(shape_of(Block)) is Block
    assert nested_block(shape_of(Block | str)) is None
    assert nested_block(shape_of(list[Block])) is None


def test_config_fields_resolve_annotations_and_skip_fields_not_in_init():
    fields = {f.name: f for f in config_fields(Config)}
    assert list(fields) == ["topic", "size", "acks", "tls", "headers", "extra"]
    assert fields["tls"].annotation == Block | None
    assert fields["topic"].required and not fields["headers"].required
    assert fields["size"].default == 1
    assert fields["headers"].default_factory() == []

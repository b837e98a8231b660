"""The one reading of the annotations of a component's `Config` dataclass.

Two readers need to know what a field's annotation allows: the compiler
(agent/schema.py turns YAML nodes into values and names the expected type in its
errors) and the reference (agent/reference/: each key's YAML type in
CONFIGURATION.md, its JSON Schema). Both used to take the annotation apart with
`typing.get_origin` / `get_args` on their own. `shape_of` does it once, into a small
tree of `Shape`s the readers match on:

    str, int, float, bool, Size, Duration, other classes  Scalar(tp)
    Any                                                    Anything()
    None (in a union)                                      Null()
    Literal[a, b]                                          Choice((a, b))
    list[X]                                                ListOf(X)
    dict[K, V]                                             MappingOf(K, V)
    a dataclass (a nested block such as `tls:`)            Nested(cls)
    X | Y | None                                           OneOf((X, Y, Null()))

`config_fields` lists the keys of a Config dataclass, with their annotations
resolved and their defaults.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union


@dataclasses.dataclass(frozen=True)
class Scalar:
    tp: type


@dataclasses.dataclass(frozen=True)
class Anything:
    pass


@dataclasses.dataclass(frozen=True)
class Null:
    pass


@dataclasses.dataclass(frozen=True)
class Choice:
    values: tuple


@dataclasses.dataclass(frozen=True)
class ListOf:
    item: Shape


@dataclasses.dataclass(frozen=True)
class MappingOf:
    key: Shape
    value: Shape


@dataclasses.dataclass(frozen=True)
class Nested:
    cls: type


@dataclasses.dataclass(frozen=True)
class OneOf:
    options: tuple[Shape, ...]  # in the annotation's order, Null() among them


Shape = Scalar | Anything | Null | Choice | ListOf | MappingOf | Nested | OneOf


def shape_of(tp: Any) -> Shape:
    """The Shape of an annotation (already resolved: no strings)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return Anything()
    if tp is type(None):
        return Null()
    if origin in (Union, types.UnionType):
        return OneOf(tuple(shape_of(a) for a in args))
    if origin is Literal:
        return Choice(args)
    if origin is list:
        return ListOf(shape_of(args[0]))
    if origin is dict:
        return MappingOf(shape_of(args[0]), shape_of(args[1]))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return Nested(tp)
    return Scalar(tp)


def nested_block(shape: Shape) -> type | None:
    """The dataclass of a key that holds a mapping of keys (`X` or `X | None`)."""
    if isinstance(shape, OneOf):
        options = [o for o in shape.options if not isinstance(o, Null)]
        return nested_block(options[0]) if len(options) == 1 else None
    return shape.cls if isinstance(shape, Nested) else None


@dataclasses.dataclass(frozen=True)
class ConfigField:
    name: str
    annotation: Any  # resolved
    default: Any  # dataclasses.MISSING when the key is required
    default_factory: Any  # dataclasses.MISSING unless the default is made by a call

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING and self.default_factory is dataclasses.MISSING

    def default_value(self) -> Any:
        """The default (a new one when made by a call); None when the key is required."""
        if self.default is not dataclasses.MISSING:
            return self.default
        if self.default_factory is not dataclasses.MISSING:
            return self.default_factory()
        return None


def config_fields(cls: type) -> list[ConfigField]:
    """The keys of a Config dataclass (its init fields), in declaration order."""
    hints = typing.get_type_hints(cls)
    return [
        ConfigField(f.name, hints[f.name], f.default, f.default_factory)
        for f in dataclasses.fields(cls)
        if f.init
    ]

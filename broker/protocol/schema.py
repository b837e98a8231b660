"""Schema declarations (data) and their compilation into per-version codecs.

(Longer than the ~450 lines modules keep to: the code generator and the step
closures it falls back to share their helpers and must change together; the
declarations themselves are in the messages_*.py modules.)

A message schema is a list of `Field`s, mirroring Kafka's message JSON: each field has
a snake_case name, a type, the versions it exists in ("0+", "3+", "0-5", "1") and the
versions in which it is nullable. A type is a primitive (INT32, STRING, RECORDS, ...),
`Array(primitive)`, or a list of Fields (an array of structs).

`compile_message(fields, version)` turns one schema at one version into a
`MessageCodec` whose `decode(buf, pos)` and `encode(body, out)` are generated once
(registry.py: on first use of that version) as straight-line Python per struct
(`_generate`): consecutive
fixed-width fields collapse into a single struct.Struct, strings and record sets are
one reader or writer call, arrays of structs loop in place, so the hot paths
(Produce decode, Fetch encode) do a handful of calls per partition and no per-field
type dispatch. The generated source contains only names and constants of the
declarations; tagged fields and arrays of primitives use the step closures below.

Flexible versions (KIP-482, `compile_message(..., flexible=True)`) write strings,
bytes, records and arrays with compact (unsigned varint length + 1) prefixes and end
every struct with a tagged-field section: fields declared with a `tag` go there, are
written only when they differ from their default, and unknown tags are skipped.

Decoded bodies are plain dicts. Fields that do not exist at the decoded version are
still present, set to their default, so handlers can index any field of any version.
On encode a missing key takes the field default; fields absent from the version are
ignored; None in a version where the field is not nullable encodes the type default.
Encoders append to a list of parts: bytes, plus RECORDS values that are not
bytes-like (e.g. a file slice the server will sendfile), appended as they are; their
size is len(value), or value.length for objects without __len__ (FetchSlice).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.protocol import primitives as p
from broker.protocol.exceptions import ProtocolError


@dataclass(frozen=True)
class Fixed:
    """Fixed-width primitive: a struct format character and a default."""

    name: str
    fmt: str
    default: object


@dataclass(frozen=True)
class Var:
    """Variable-width primitive (string, bytes, records, uuid)."""

    name: str
    default: object


INT8 = Fixed("int8", "b", 0)
INT16 = Fixed("int16", "h", 0)
INT32 = Fixed("int32", "i", 0)
INT64 = Fixed("int64", "q", 0)
UINT32 = Fixed("uint32", "I", 0)
FLOAT64 = Fixed("float64", "d", 0.0)
BOOL = Fixed("bool", "?", False)
STRING = Var("string", "")
BYTES = Var("bytes", b"")
RECORDS = Var("records", b"")
UUID = Var("uuid", uuid.UUID(int=0))


@dataclass(frozen=True)
class Array:
    """Array of a primitive; arrays of structs are written as a list of Fields."""

    item: Fixed | Var


@dataclass(frozen=True)
class Struct:
    """A single struct field (not an array): Kafka's LeaderIdAndEpoch and the like.
    Where it is nullable (an untagged field: DescribeTopicPartitions' Cursor), Kafka
    writes an int8 before it: -1 for null, 1 for a struct that follows."""

    fields: tuple


def _parse_versions(spec: str | None) -> tuple[int, int]:
    if spec is None:
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


_NO_DEFAULT = object()


@dataclass(frozen=True)
class Field:
    """One field of a message schema (immutable declaration)."""

    name: str
    # Fixed, Var, Array, Struct, or a list of Fields (an array of structs); the steps
    # are chosen by isinstance at compile time
    type: Any
    versions: str = "0+"
    nullable: str | None = None
    default: object = _NO_DEFAULT
    tag: int | None = None  # a tagged field (flexible versions only), as in Kafka's JSON

    def exists(self, version: int) -> bool:
        lo, hi = _parse_versions(self.versions)
        return lo <= version <= hi

    def nullable_at(self, version: int) -> bool:
        lo, hi = _parse_versions(self.nullable)
        return lo <= version <= hi

    def default_value(self):
        """Declared default, else None for nullable fields, else the type's default."""
        if self.default is not _NO_DEFAULT:
            return self.default
        if self.nullable is not None:
            return None
        if isinstance(self.type, list | Array):
            return []
        if isinstance(self.type, Struct):
            return {f.name: f.default_value() for f in self.type.fields}
        return self.type.default


F = Field  # short name for the declarations: F("acks", INT16), F("rack", STRING, "1+", "1+")


def _default_maker(f: Field):
    value = f.default_value()
    if isinstance(value, list):
        return list
    if isinstance(value, dict):
        return lambda: dict(value)
    return lambda: value


# --------------------------------------------------------------------------- decoding


def _check_count(n: int, buf, pos: int, min_item: int) -> None:
    if n * min_item > len(buf) - pos:
        raise ProtocolError(f"array count {n} at offset {pos} exceeds the remaining bytes")


def _var_reader(t: Var, nullable: bool, flexible: bool):
    if t is STRING:
        if flexible:
            return p.read_compact_nullable_string if nullable else p.read_compact_string
        return p.read_nullable_string if nullable else p.read_string
    if t is BYTES:
        if flexible:
            return p.read_compact_nullable_bytes if nullable else p.read_compact_bytes
        return p.read_nullable_bytes if nullable else p.read_bytes
    if t is RECORDS:
        return p.read_compact_records if flexible else p.read_records
    if t is UUID:
        return p.read_uuid
    raise TypeError(f"no reader for {t}")


def _read_int32_count(buf, pos):
    return p.INT32.unpack_from(buf, pos)[0], pos + 4


def _array_step(f: Field, version: int, flexible: bool):
    name = f.name
    nullable = f.nullable_at(version)
    read_count = p.read_compact_array_length if flexible else _read_int32_count
    if isinstance(f.type, list):
        item = compile_message(f.type, version, flexible).decode

        def read_items(buf, pos, n):
            items: list[object] = []
            append = items.append
            for _ in range(n):
                value, pos = item(buf, pos)
                append(value)
            return items, pos

        min_item = 1
    elif isinstance(f.type.item, Fixed):
        fmt = f.type.item.fmt
        size = struct.calcsize(fmt)

        def read_items(buf, pos, n):
            return list(struct.unpack_from(f">{n}{fmt}", buf, pos)), pos + n * size

        min_item = size
    else:
        reader = _var_reader(f.type.item, False, flexible)

        def read_items(buf, pos, n):
            items = []
            for _ in range(n):
                value, pos = reader(buf, pos)
                items.append(value)
            return items, pos

        min_item = 1 if flexible else 2

    def step(buf, pos, d):
        start = pos
        n, pos = read_count(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                d[name] = None
                return pos
            raise ProtocolError(f"invalid count {n} for array {name!r} at offset {start}")
        _check_count(n, buf, pos, min_item)
        d[name], pos = read_items(buf, pos, n)
        return pos

    return step


def _struct_step(f: Field, version: int, flexible: bool):
    name = f.name
    decode = compile_message(list(f.type.fields), version, flexible).decode
    if f.nullable_at(version):

        def nullable_step(buf, pos, d):
            if p.INT8.unpack_from(buf, pos)[0] < 0:
                d[name] = None
                return pos + 1
            d[name], pos = decode(buf, pos + 1)
            return pos

        return nullable_step

    def step(buf, pos, d):
        d[name], pos = decode(buf, pos)
        return pos

    return step


def _var_step(f: Field, version: int, flexible: bool):
    name = f.name
    reader = _var_reader(f.type, f.nullable_at(version), flexible)

    def step(buf, pos, d):
        d[name], pos = reader(buf, pos)
        return pos

    return step


def _fixed_step(f: Field):
    """Read step of one fixed-width field outside a generated struct (a tagged field)."""
    name = f.name
    unpack, size = struct.Struct(">" + f.type.fmt).unpack_from, struct.calcsize(">" + f.type.fmt)

    def step(buf, pos, d):
        d[name] = unpack(buf, pos)[0]
        return pos + size

    return step


def _runs(fields: list[Field]):
    """Group consecutive fixed-width fields; yield ("fixed", [fields]) or ("one", field)."""
    run: list[Field] = []
    for f in fields:
        if isinstance(f.type, Fixed):
            run.append(f)
            continue
        if run:
            yield "fixed", run
            run = []
        yield "one", f
    if run:
        yield "fixed", run


# --------------------------------------------------------------------------- encoding


def _var_writer(t: Var, flexible: bool):
    if t is STRING:
        return p.write_compact_string if flexible else p.write_string
    if t is BYTES:
        return p.write_compact_bytes if flexible else p.write_bytes
    if t is UUID:
        return p.write_uuid
    raise TypeError(f"no writer for {t}")


def _count_writer(flexible: bool):
    """Length/count prefix writer: int32 (-1 = null), or compact (0 = null)."""
    if not flexible:
        pack = p.INT32.pack
        return pack, p.NULL_LENGTH32
    small = [bytes((n + 1,)) for n in range(126)]

    def compact(n: int) -> bytes:
        if n < 126:
            return small[n]
        n += 1
        if n < 0x200000:  # two or three varint bytes, the size of a record set
            if n < 0x4000:
                return bytes(((n & 0x7F) | 0x80, n >> 7))
            return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
        return p.write_unsigned_varint(n)

    return compact, b"\x00"


def record_set_length(value) -> int:
    """Byte length of a record set given as bytes, a sized object or a `.length` slice."""
    try:
        return len(value)
    except TypeError:
        return value.length


def _records_encoder(f: Field, version: int, flexible: bool):
    name = f.name
    nullable = f.nullable_at(version)
    default = f.default_value()
    pack, null = _count_writer(flexible)

    def step(d, out):
        value = d.get(name, default)
        if value is None:
            if nullable:
                out.append(null)
                return
            value = b""
        out.append(pack(record_set_length(value)))
        out.append(value)

    return step


def _array_encoder(f: Field, version: int, flexible: bool):
    name = f.name
    nullable = f.nullable_at(version)
    pack, null = _count_writer(flexible)
    if isinstance(f.type, list):
        item = compile_message(f.type, version, flexible).encode

        def write_items(values, out):
            for v in values:
                item(v, out)

    elif isinstance(f.type.item, Fixed):
        fmt = f.type.item.fmt

        def write_items(values, out):
            out.append(struct.pack(f">{len(values)}{fmt}", *values))

    else:
        writer = _var_writer(f.type.item, flexible)

        def write_items(values, out):
            out.extend(map(writer, values))

    def step(d, out):
        values = d.get(name)
        if values is None:
            if nullable:
                out.append(null)
                return
            values = ()
        out.append(pack(len(values)))
        write_items(values, out)

    return step


def _struct_encoder(f: Field, version: int, flexible: bool):
    name = f.name
    encode = compile_message(list(f.type.fields), version, flexible).encode
    if f.nullable_at(version):

        def nullable_step(d, out):
            value = d.get(name)
            if value is None:
                out.append(b"\xff")
                return
            out.append(b"\x01")
            encode(value, out)

        return nullable_step
    default = f.default_value()

    def step(d, out):
        encode(d.get(name) or default, out)

    return step


def _var_encoder(f: Field, version: int, flexible: bool):
    name = f.name
    nullable = f.nullable_at(version)
    default = f.default_value()
    type_default = f.type.default
    writer = _var_writer(f.type, flexible)

    def step(d, out):
        value = d.get(name, default)
        if value is None and not nullable:
            value = type_default
        out.append(writer(value))

    return step


def _fixed_encoder(f: Field):
    """Write step of one fixed-width field outside a generated struct (a tagged field)."""
    name, default, pack = f.name, f.default_value(), struct.Struct(">" + f.type.fmt).pack

    def step(d, out):
        out.append(pack(d.get(name, default)))

    return step


# --------------------------------------------------------------------------- compiling


@dataclass(frozen=True)
class MessageCodec:
    """One schema compiled at one version. Immutable; safe across threads.

    decode(buf, pos) -> (dict, pos); encode(dict, out: list) appends parts to out.
    """

    fields: tuple[Field, ...]
    version: int
    decode: Callable[[Any, int], tuple[dict[str, Any], int]]
    encode: Callable[[dict[str, Any], list[Any]], None]


def _field_steps(f: Field, version: int, flexible: bool) -> tuple:
    """(read step, write step) of one field that is not part of a fixed run."""
    if isinstance(f.type, list | Array):
        return _array_step(f, version, flexible), _array_encoder(f, version, flexible)
    if isinstance(f.type, Struct):
        return _struct_step(f, version, flexible), _struct_encoder(f, version, flexible)
    if isinstance(f.type, Fixed):
        return _fixed_step(f), _fixed_encoder(f)
    if f.type is RECORDS:
        return _var_step(f, version, flexible), _records_encoder(f, version, flexible)
    return _var_step(f, version, flexible), _var_encoder(f, version, flexible)


def _tagged_steps(tagged: list[Field], version: int):
    """Read and write steps of a struct's tagged-field section (flexible versions)."""
    known = {}
    writers = []
    defaults = []
    for f in sorted(tagged, key=lambda f: f.tag or 0):
        tag = f.tag
        assert tag is not None  # only tagged fields come here
        read, write = _field_steps(f, version, True)
        known[tag] = read
        writers.append((p.write_unsigned_varint(tag), f.name, f.default_value(), write))
        defaults.append((f.name, _default_maker(f)))

    def read_tagged(buf, pos, d):
        for name, make in defaults:
            d[name] = make()
        if buf[pos] == 0:
            return pos + 1
        count, pos = p.read_unsigned_varint(buf, pos)
        for _ in range(count):
            tag, pos = p.read_unsigned_varint(buf, pos)
            size, pos = p.read_unsigned_varint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise ProtocolError(f"tagged field {tag} of {size} bytes runs past the end")
            read = known.get(tag)
            if read is not None and read(buf, pos, d) != end:
                raise ProtocolError(f"tagged field {tag} does not fill its {size} bytes")
            pos = end
        return pos

    names = tuple(name for _, name, _, _ in writers)

    def write_tagged(d, out):
        fields = []
        for tag, name, default, write in writers:
            value = d.get(name, default)
            if value is None or value == default:
                continue
            parts: list = []
            write(d, parts)
            data = b"".join(parts)
            fields.append(tag + p.write_unsigned_varint(len(data)) + data)
        out.append(p.write_unsigned_varint(len(fields)) + b"".join(fields))

    return read_tagged, write_tagged, names, defaults


def compile_message(fields: list[Field], version: int, flexible: bool = False) -> MessageCodec:
    present = [f for f in fields if f.exists(version)]
    tagged = [f for f in present if f.tag is not None]
    if tagged and not flexible:
        raise TypeError(f"tagged fields {[f.name for f in tagged]} in non-flexible v{version}")
    present = [f for f in present if f.tag is None]
    absent = [(f.name, _default_maker(f)) for f in fields if not f.exists(version)]
    tags = _tagged_steps(tagged, version) if tagged else None
    decode, encode = _generate(present, version, flexible, absent, tags)
    return MessageCodec(tuple(present), version, decode, encode)


def _generate(present: list[Field], version: int, flexible: bool, absent: list, tags):
    """decode and encode of one struct as straight-line Python, compiled once: each
    fixed run is one unpack/pack, each string or records field one reader/writer call,
    arrays and nested structs one call to their own step; no loop over steps. A
    flexible struct's tag section is handled inline when empty (the usual case), else
    by `tags` (from _tagged_steps), or skipped when the struct declares no tagged field."""
    env: dict = {"skip": p.skip_tagged_fields}
    dec = ["def decode(buf, pos):", "    d = {}"]
    enc = ["def encode(d, out):", "    append = out.append"]
    for i, (kind, item) in enumerate(_runs(present)):
        if kind == "fixed":
            st = struct.Struct(">" + "".join(f.type.fmt for f in item))
            env[f"u{i}"], env[f"k{i}"] = st.unpack_from, st.pack
            targets = ", ".join(f"d[{f.name!r}]" for f in item)
            dec += [f"    {targets}, = u{i}(buf, pos)", f"    pos += {st.size}"]
            args = []
            for j, f in enumerate(item):
                env[f"z{i}_{j}"] = f.default_value()
                args.append(f"d.get({f.name!r}, z{i}_{j})")
            enc.append(f"    append(k{i}({', '.join(args)}))")
        elif isinstance(item.type, Var):
            nullable = item.nullable_at(version)
            env[f"r{i}"] = _var_reader(item.type, nullable, flexible)
            dec.append(f"    d[{item.name!r}], pos = r{i}(buf, pos)")
            if item.type is RECORDS:
                enc += _records_encode(env, i, item, version, flexible)
                continue
            env[f"w{i}"], env[f"z{i}"] = _var_writer(item.type, flexible), item.default_value()
            if nullable:
                enc.append(f"    append(w{i}(d.get({item.name!r}, z{i})))")
            else:
                env[f"t{i}"] = item.type.default
                enc += [
                    f"    v = d.get({item.name!r}, z{i})",
                    f"    append(w{i}(t{i} if v is None else v))",
                ]
        elif isinstance(item.type, list):  # an array of structs: the hot loops
            dec += _struct_array_decode(env, i, item, version, flexible)
            enc += _struct_array_encode(env, i, item, version, flexible)
        else:
            env[f"q{i}"], env[f"s{i}"] = _field_steps(item, version, flexible)
            dec.append(f"    pos = q{i}(buf, pos, d)")
            enc.append(f"    s{i}(d, out)")
    for j, (name, make) in enumerate(absent):
        env[f"m{j}"] = make
        dec.append(f"    d[{name!r}] = m{j}()")
    if not flexible:
        dec.append("    return d, pos")
    else:
        read_tagged, write_tagged, names, defaults = tags or (None, None, (), ())
        env["read_tagged"], env["write_tagged"], env["names"] = read_tagged, write_tagged, names
        dec.append("    if buf[pos] == 0:")
        for j, (name, make) in enumerate(defaults):
            env[f"g{j}"] = make
            dec.append(f"        d[{name!r}] = g{j}()")
        dec.append("        return d, pos + 1")
        dec.append(
            f"    return d, {'skip(buf, pos)' if tags is None else 'read_tagged(buf, pos, d)'}"
        )
        if tags is None:
            enc.append('    append(b"\\x00")')
        else:
            enc += [
                "    if d.keys().isdisjoint(names):",
                '        append(b"\\x00")',
                "    else:",
                "        write_tagged(d, out)",
            ]
    exec("\n".join(dec) + "\n\n" + "\n".join(enc), env)  # noqa: S102 - our own source
    return env["decode"], env["encode"]


def _struct_array_decode(env: dict, i: int, f: Field, version: int, flexible: bool) -> list:
    env[f"e{i}"] = compile_message(f.type, version, flexible).decode
    env[f"c{i}"] = p.read_compact_array_length if flexible else _read_int32_count
    env["check_count"], env["ProtocolError"] = _check_count, ProtocolError
    invalid = f"raise ProtocolError(f'invalid count {{n}} for array {f.name} at offset {{pos}}')"
    null = [
        "    if n < 0:",
        f"        if n == -1 and {f.nullable_at(version)}:",
        f"            d[{f.name!r}] = None",
        "        else:",
        f"            {invalid}",
    ]
    return [
        f"    n, pos = c{i}(buf, pos)",
        *null,
        "    else:",
        "        check_count(n, buf, pos, 1)",
        "        items = []",
        "        for _ in range(n):",
        f"            item, pos = e{i}(buf, pos)",
        "            items.append(item)",
        f"        d[{f.name!r}] = items",
    ]


def _records_encode(env: dict, i: int, f: Field, version: int, flexible: bool) -> list:
    """A record set: its length (record_set_length: bytes or a file slice), then the
    value itself as its own part, never copied."""
    env[f"n{i}"], env[f"x{i}"] = _count_writer(flexible)
    env[f"z{i}"], env["record_set_length"] = f.default_value(), record_set_length
    if_null = f"append(x{i})" if f.nullable_at(version) else f"append(n{i}(0)); append(b'')"
    return [
        f"    v = d.get({f.name!r}, z{i})",
        "    if v is None:",
        f"        {if_null}",
        "    else:",
        f"        append(n{i}(record_set_length(v)))",
        "        append(v)",
    ]


def _struct_array_encode(env: dict, i: int, f: Field, version: int, flexible: bool) -> list:
    env[f"a{i}"] = compile_message(f.type, version, flexible).encode
    env[f"n{i}"], env[f"x{i}"] = _count_writer(flexible)
    if_null = f"append(x{i})" if f.nullable_at(version) else f"append(n{i}(0))"
    return [
        f"    vs = d.get({f.name!r})",
        "    if vs is None:",
        f"        {if_null}",
        "    else:",
        f"        append(n{i}(len(vs)))",
        "        for v in vs:",
        f"            a{i}(v, out)",
    ]

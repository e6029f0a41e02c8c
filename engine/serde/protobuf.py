"""PROTOBUF and PROTOBUF_NOSR records as Kafka bytes.

    text = proto_schema(serde)                       # ksqlDB's proto3 text for the columns
    codec = ProtoCodec.from_text(text)               # the first message (or a full name)
    payload = codec.encode({"ID": 1, "NAME": "a"})   # protobuf binary
    codec.decode(payload)                            # {"ID": 1, "NAME": "a"}

ksqlDB writes a PROTOBUF record as Confluent's serializer does: magic byte 0, the 4-byte
schema id, the message-index array (zigzag varints: the count, then the index path of the
message in the schema; a single 0 byte for the first top-level message), then the protobuf
payload. PROTOBUF_NOSR is the bare payload. The schema is the proto3 text ksqlDB's
translator (Connect's ``ProtobufData``) generates from the columns (``proto_schema``):
message ``ConnectDefault1`` (or ``*_SCHEMA_FULL_NAME``), one field per column numbered from
1, a nested STRUCT a nested message ``ConnectDefault2`` ..., ARRAY ``repeated``, MAP
``map<string, V>``, DECIMAL ``confluent.type.Decimal`` with its precision and scale in
``confluent.field_meta``, TIMESTAMP ``google.protobuf.Timestamp``, DATE ``google.type.Date``,
TIME ``google.type.TimeOfDay``; with the nullable representation ``WRAPPER`` a primitive is
its ``google.protobuf`` wrapper, with ``OPTIONAL`` an ``optional`` field.

The text is parsed (``proto_schema_parser``) into a ``FileDescriptorProto`` and loaded in a
descriptor pool of its own with the well-known files it imports (``google/protobuf/*``,
``google/type/date.proto``, ``google/type/timeofday.proto``, ``confluent/type/decimal.proto``,
``confluent/meta.proto``) and the schema's references; ``message_factory`` makes the class.
No protoc. Values are in QTT form on both sides (temporal types as days or milliseconds,
DECIMAL as ``decimal.Decimal``, BYTES as base64 text); a field the message lacks reads as
NULL (a message, wrapper or ``optional`` field not set) or as proto3's default.
"""

from __future__ import annotations

import base64
import decimal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import RecordSerdeError
from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde.formats import NULLABLE_REPRESENTATION, SCHEMA_FULL_NAME, FormatInfo
from engine.serde.schema_text import SchemaTranslationError, parse_proto

DEFAULT_MESSAGE = "ConnectDefault1"
DECIMAL_TYPE = "confluent.type.Decimal"
TIMESTAMP_TYPE = "google.protobuf.Timestamp"
DATE_TYPE = "google.type.Date"
TIME_TYPE = "google.type.TimeOfDay"

_SCALARS: dict[T.BaseType, str] = {
    T.BaseType.BOOLEAN: "bool",
    T.BaseType.INTEGER: "int32",
    T.BaseType.BIGINT: "int64",
    T.BaseType.DOUBLE: "double",
    T.BaseType.STRING: "string",
    T.BaseType.BYTES: "bytes",
}
_WRAPPERS: dict[T.BaseType, str] = {
    T.BaseType.BOOLEAN: "google.protobuf.BoolValue",
    T.BaseType.INTEGER: "google.protobuf.Int32Value",
    T.BaseType.BIGINT: "google.protobuf.Int64Value",
    T.BaseType.DOUBLE: "google.protobuf.DoubleValue",
    T.BaseType.STRING: "google.protobuf.StringValue",
    T.BaseType.BYTES: "google.protobuf.BytesValue",
}
_IMPORTS = {
    TIMESTAMP_TYPE: "google/protobuf/timestamp.proto",
    DATE_TYPE: "google/type/date.proto",
    TIME_TYPE: "google/type/timeofday.proto",
    DECIMAL_TYPE: "confluent/type/decimal.proto",
    "google.protobuf": "google/protobuf/wrappers.proto",
}
_META_IMPORT = "confluent/meta.proto"
_WRAPPER_NAMES = frozenset(
    f"google.protobuf.{n}Value" for n in ("Bool", "Int32", "UInt32", "Int64", "UInt64", "Float", "Double",
                                          "String", "Bytes")
)


# ---------------------------------------------------------------------- the schema text


def proto_schema(
    columns: Sequence[Column], fmt: FormatInfo
) -> str:
    """The proto3 text ksqlDB generates for a key's or value's columns (see the module)."""
    full_name = str(fmt.get(SCHEMA_FULL_NAME) or DEFAULT_MESSAGE)
    package, _, name = full_name.rpartition(".")
    nullable = str(fmt.get(NULLABLE_REPRESENTATION) or "").upper()
    generator = _Generator(nullable)
    body = generator.message(name, [(c.name, c.type) for c in columns], indent="")
    lines = ['syntax = "proto3";']
    if package:
        lines.append(f"package {package};")
    lines.append("")
    lines.extend(f'import "{i}";' for i in sorted(generator.imports))
    if generator.imports:
        lines.append("")
    return "\n".join(lines) + "\n" + body


class _Generator:
    def __init__(self, nullable: str) -> None:
        self.nullable = nullable
        self.imports: set[str] = set()
        self.counter = 1

    def message(self, name: str, fields: list[tuple[str, T.SqlType]], indent: str) -> str:
        inner = indent + "  "
        lines = [f"{indent}message {name} {{"]
        nested: list[str] = []
        for number, (field_name, t) in enumerate(fields, start=1):
            lines.append(f"{inner}{self.field(field_name, t, number, nested, inner)}")
        for text in nested:
            lines.append("")
            lines.append(text.rstrip("\n"))
        lines.append(f"{indent}}}")
        return "\n".join(lines) + "\n"

    def field(self, name: str, t: T.SqlType, number: int, nested: list[str], indent: str) -> str:
        if isinstance(t, T.Array):
            return f"repeated {self.type_name(t.item, nested, indent)} {name} = {number};"
        if isinstance(t, T.Map):
            return f"map<string, {self.type_name(t.value, nested, indent)}> {name} = {number};"
        if isinstance(t, T.Decimal):
            self.imports.add(_META_IMPORT)
            return (
                f"{self.type_name(t, nested, indent)} {name} = {number} [(confluent.field_meta) = {{ params: "
                f'[{{ key: "precision", value: "{t.precision}" }}, {{ key: "scale", value: "{t.scale}" }}] }}];'
            )
        if t.base in _SCALARS and self.nullable == "WRAPPER":
            self.imports.add(_IMPORTS["google.protobuf"])
            return f"{_WRAPPERS[t.base]} {name} = {number};"
        label = "optional " if t.base in _SCALARS and self.nullable == "OPTIONAL" else ""
        return f"{label}{self.type_name(t, nested, indent)} {name} = {number};"

    def type_name(self, t: T.SqlType, nested: list[str], indent: str) -> str:
        if isinstance(t, T.Struct):
            self.counter += 1
            name = f"ConnectDefault{self.counter}"
            nested.append(self.message(name, [(f.name, f.type) for f in t.fields], indent))
            return name
        if isinstance(t, T.Decimal):
            self.imports.add(_IMPORTS[DECIMAL_TYPE])
            return DECIMAL_TYPE
        if isinstance(t, T.Array | T.Map):
            raise RecordSerdeError(f"PROTOBUF cannot nest {t} directly in an ARRAY or MAP.")
        temporal = {T.BaseType.TIMESTAMP: TIMESTAMP_TYPE, T.BaseType.DATE: DATE_TYPE,
                    T.BaseType.TIME: TIME_TYPE}.get(t.base)
        if temporal is not None:
            self.imports.add(_IMPORTS[temporal])
            return temporal
        return _SCALARS[t.base]


# ---------------------------------------------------------------------- text -> descriptors


_WELL_KNOWN_LOCK = threading.Lock()


def _well_known_files() -> dict[str, bytes]:
    """The serialized FileDescriptorProtos of the files a schema may import without a
    reference."""
    from google.protobuf import (
        any_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    modules: list[Any] = [descriptor_pb2, any_pb2, duration_pb2, empty_pb2, struct_pb2, timestamp_pb2,
                          wrappers_pb2]
    try:
        from google.type import date_pb2, timeofday_pb2

        modules += [date_pb2, timeofday_pb2]
    except ImportError:  # googleapis-common-protos is absent: such imports are refused
        pass
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry.confluent import meta_pb2
        from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    modules += [meta_pb2, decimal_pb2]
    return {m.DESCRIPTOR.name: m.DESCRIPTOR.serialized_pb for m in modules}


_PROTO_TYPES = {
    "double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
    "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16,
    "sint32": 17, "sint64": 18,
}
_TYPE_MESSAGE, _TYPE_ENUM = 11, 14


def _file_descriptor(name: str, text: str) -> Any:
    """A ``FileDescriptorProto`` of proto text (type names resolved in a later pass)."""
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast as P

    parsed = parse_proto(text)
    fdp = descriptor_pb2.FileDescriptorProto(name=name, syntax=parsed.syntax or "proto2")
    for element in parsed.file_elements:
        if isinstance(element, P.Package):
            fdp.package = element.name
        elif isinstance(element, P.Import):
            fdp.dependency.append(element.name)
        elif isinstance(element, P.Message):
            _message_descriptor(element, fdp.message_type.add(), fdp.syntax)
        elif isinstance(element, P.Enum):
            _enum_descriptor(element, fdp.enum_type.add())
    return fdp


def _enum_descriptor(enum: Any, out: Any) -> None:
    from proto_schema_parser import ast as P

    out.name = enum.name
    for value in enum.elements:
        if isinstance(value, P.EnumValue):
            out.value.add(name=value.name, number=int(value.number))


def _message_descriptor(message: Any, out: Any, syntax: str) -> None:
    from proto_schema_parser import ast as P

    out.name = message.name

    def add_field(field: Any, oneof: int | None) -> None:
        fd = out.field.add(name=field.name, number=int(field.number), json_name=_json_name(field.name))
        cardinality = getattr(field.cardinality, "value", None)
        fd.label = 3 if cardinality == "REPEATED" else 2 if cardinality == "REQUIRED" else 1
        _set_type(fd, field.type)
        if oneof is not None:
            fd.oneof_index = oneof
        elif cardinality == "OPTIONAL" and syntax == "proto3":
            fd.proto3_optional = True
            fd.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=f"_{field.name}")

    for element in message.elements:
        if isinstance(element, P.Field):
            add_field(element, None)
        elif isinstance(element, P.MapField):
            entry_name = "".join(part[:1].upper() + part[1:] for part in element.name.split("_")) + "Entry"
            entry = out.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=1, json_name="key")
            _set_type(key, element.key_type)
            value = entry.field.add(name="value", number=2, label=1, json_name="value")
            _set_type(value, element.value_type)
            fd = out.field.add(name=element.name, number=int(element.number), label=3,
                               json_name=_json_name(element.name))
            fd.type = _TYPE_MESSAGE
            fd.type_name = entry_name
        elif isinstance(element, P.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=element.name)
            for field in element.elements:
                if isinstance(field, P.Field):
                    add_field(field, index)
        elif isinstance(element, P.Message):
            _message_descriptor(element, out.nested_type.add(), syntax)
        elif isinstance(element, P.Enum):
            _enum_descriptor(element, out.enum_type.add())
    # proto3 optional's synthetic oneofs come after the real ones (protoc's order)
    real = [i for i, d in enumerate(out.oneof_decl) if not d.name.startswith("_")]
    if real and len(real) != len(out.oneof_decl):
        order = real + [i for i in range(len(out.oneof_decl)) if i not in real]
        remap = {old: new for new, old in enumerate(order)}
        decls = [out.oneof_decl[i].name for i in order]
        del out.oneof_decl[:]
        for d in decls:
            out.oneof_decl.add(name=d)
        for fd in out.field:
            if fd.HasField("oneof_index"):
                fd.oneof_index = remap[fd.oneof_index]


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _set_type(fd: Any, type_name: str) -> None:
    if type_name in _PROTO_TYPES:
        fd.type = _PROTO_TYPES[type_name]
    else:
        fd.type_name = type_name  # kind and full name resolved once every file is known


def _resolve(fdp: Any, known: Mapping[str, int]) -> None:
    """Give every named field type of ``fdp`` its full name (``.pkg.Msg``) and kind, by
    protobuf's scoping rules (innermost scope first)."""
    package = fdp.package

    def walk(messages: Any, scope: str) -> None:
        for message in messages:
            inner = f"{scope}.{message.name}" if scope else message.name
            for fd in message.field:
                if fd.type_name and not fd.type_name.startswith("."):
                    full = _lookup(fd.type_name, inner, known)
                    if full is None:
                        raise RecordSerdeError(
                            f"The protobuf schema's field '{message.name}.{fd.name}' has the unknown type "
                            f"'{fd.type_name}'."
                        )
                    fd.type_name = "." + full
                    fd.type = known[full]
            walk(message.nested_type, inner)

    walk(fdp.message_type, package)


def _lookup(name: str, scope: str, known: Mapping[str, int]) -> str | None:
    parts = scope.split(".") if scope else []
    while True:
        candidate = ".".join([*parts, name])
        if candidate in known:
            return candidate
        if not parts:
            return None
        parts.pop()


def _declared(fdp: Any) -> dict[str, int]:
    out: dict[str, int] = {}

    def walk(messages: Any, enums: Any, scope: str) -> None:
        for enum in enums:
            out[f"{scope}.{enum.name}" if scope else enum.name] = _TYPE_ENUM
        for message in messages:
            full = f"{scope}.{message.name}" if scope else message.name
            out[full] = _TYPE_MESSAGE
            walk(message.nested_type, message.enum_type, full)

    walk(fdp.message_type, fdp.enum_type, fdp.package)
    return out


def _message_names(fdp: Any) -> list[tuple[str, tuple[int, ...]]]:
    """Every message's full name with its index path (Confluent's message indexes)."""
    out: list[tuple[str, tuple[int, ...]]] = []

    def walk(messages: Any, scope: str, path: tuple[int, ...]) -> None:
        for i, message in enumerate(messages):
            full = f"{scope}.{message.name}" if scope else message.name
            if not message.options.map_entry:
                out.append((full, (*path, i)))
            walk(message.nested_type, full, (*path, i))

    walk(fdp.message_type, fdp.package, ())
    return out


# ---------------------------------------------------------------------- message indexes


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _write_varint(n: int, out: bytearray) -> None:
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """Confluent's message-index array: a single 0 for the first message, else the zigzag
    varint count and each index as a zigzag varint."""
    if tuple(indexes) == (0,):
        return b"\x00"
    out = bytearray()
    _write_varint(_zigzag(len(indexes)), out)
    for i in indexes:
        _write_varint(_zigzag(i), out)
    return bytes(out)


def decode_message_indexes(data: bytes, what: str) -> tuple[tuple[int, ...], bytes]:
    """The message indexes at the start of ``data`` and the payload after them."""
    pos = 0

    def read() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise RecordSerdeError(f"The {what} bytes end inside the protobuf message indexes.")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)

    count = read()
    if count == 0:
        return (0,), data[pos:]
    if count < 0 or count > 100:
        raise RecordSerdeError(f"The {what} bytes have an invalid protobuf message index count {count}.")
    return tuple(read() for _ in range(count)), data[pos:]


# ---------------------------------------------------------------------- the codec


class ProtoCodec:
    """One protobuf message of a schema: its class, its index path, and QTT form <-> bytes."""

    def __init__(self, pool: Any, full_name: str, indexes: tuple[int, ...], messages: Mapping[tuple[int, ...], str]) -> None:
        from google.protobuf import message_factory

        self.pool = pool
        self.full_name = full_name
        self.indexes = indexes
        self._messages = dict(messages)
        self.message_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))

    @classmethod
    def from_text(
        cls, text: str, *, full_name: str | None = None, imports: Mapping[str, str] | None = None,
        file_name: str = "schema.proto",
    ) -> ProtoCodec:
        """The codec of ``text``'s first message (or ``full_name``'s); ``imports``: the text
        of each file it imports by name (a registered schema's references)."""
        from google.protobuf import descriptor_pb2, descriptor_pool

        try:
            main = _file_descriptor(file_name, text)
            referenced = {n: _file_descriptor(n, t) for n, t in (imports or {}).items()}
        except SchemaTranslationError as exc:
            raise RecordSerdeError(str(exc)) from None
        well_known = _well_known_files()
        pool = descriptor_pool.DescriptorPool()
        known: dict[str, int] = {}
        added: set[str] = set()

        def add_well_known(name: str) -> None:
            if name in added:
                return
            proto = descriptor_pb2.FileDescriptorProto.FromString(well_known[name])
            for dep in proto.dependency:
                add_well_known(dep)
            pool.Add(proto)
            known.update(_declared(proto))
            added.add(name)

        def add(name: str, fdp: Any, visiting: frozenset[str]) -> None:
            if name in added:
                return
            if name in visiting:
                raise RecordSerdeError(f"The protobuf schema imports '{name}' in a cycle.")
            for dep in fdp.dependency:
                if dep in referenced:
                    add(dep, referenced[dep], visiting | {name})
                elif dep in well_known:
                    add_well_known(dep)
                else:
                    raise RecordSerdeError(f"The protobuf schema imports '{dep}', which it does not reference.")
            known.update(_declared(fdp))
            _resolve(fdp, known)
            try:
                pool.Add(fdp)
            except Exception as exc:  # the pool's TypeError names the bad definition
                raise RecordSerdeError(f"The protobuf schema is not valid: {exc}") from None
            added.add(name)

        with _WELL_KNOWN_LOCK:
            add(file_name, main, frozenset())
        names = _message_names(main)
        if not names:
            raise RecordSerdeError("The protobuf schema defines no message.")
        by_path = {path: full for full, path in names}
        if full_name:
            match = [(f, p) for f, p in names if f == full_name]
            if not match:
                raise RecordSerdeError(
                    f"The protobuf schema has no message '{full_name}' (it has {', '.join(f for f, _ in names)})."
                )
            chosen, path = match[0]
        else:
            chosen, path = names[0]
        return cls(pool, chosen, path, by_path)

    def class_for(self, indexes: tuple[int, ...]) -> Any:
        """The message class the index path names (the codec's own for its path)."""
        if indexes == self.indexes:
            return self.message_class
        full = self._messages.get(indexes)
        if full is None:
            return None
        from google.protobuf import message_factory

        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full))

    # -- QTT form -> message

    def encode(self, record: Any, columns: Sequence[Column], what: str) -> bytes:
        """The payload of a wrapped record (an object of the columns' values)."""
        if not isinstance(record, Mapping):
            raise RecordSerdeError(f"Cannot write the {what}: expected an object, got {record!r}.")
        message = self.message_class()
        _fill(message, record, {c.name: c.type for c in columns}, what)
        try:
            return bytes(message.SerializeToString())
        except Exception as exc:
            raise RecordSerdeError(f"Cannot write the {what} as {self.full_name}: {exc}") from None

    def decode(self, payload: bytes, what: str, message_class: Any = None) -> dict[str, Any]:
        """A payload as an object of its fields in QTT form."""
        message = (message_class or self.message_class)()
        try:
            message.ParseFromString(payload)
        except Exception as exc:  # google.protobuf.message.DecodeError
            raise RecordSerdeError(
                f"The {what} bytes are not a valid protobuf {message.DESCRIPTOR.full_name} message: {exc}."
            ) from None
        return _read_message(message)


def _fill(message: Any, record: Mapping[str, Any], types: Mapping[str, T.SqlType], where: str) -> None:
    fields = message.DESCRIPTOR.fields_by_name
    upper = {name.upper(): fd for name, fd in fields.items()}
    for key, value in record.items():
        fd = fields.get(str(key)) or upper.get(str(key).upper())
        if fd is None or value is None:
            continue  # a field the message lacks is not written, as AVRO's writer drops it
        t = types.get(str(key)) or next((v for k, v in types.items() if k.upper() == str(key).upper()), None)
        path = f"{where} field {fd.name}"
        if _is_map(fd):
            target = getattr(message, fd.name)
            value_fd = fd.message_type.fields_by_name["value"]
            vt = t.value if isinstance(t, T.Map) else None
            if not isinstance(value, Mapping):
                raise RecordSerdeError(f"Cannot write the {path}: expected a map, got {value!r}.")
            for k, v in value.items():
                if v is None:
                    continue
                if value_fd.message_type is not None:
                    _set_message(target[str(k)], v, vt, path)
                else:
                    target[str(k)] = _scalar(value_fd, v, path)
        elif fd.is_repeated:
            target = getattr(message, fd.name)
            it = t.item if isinstance(t, T.Array) else None
            if not isinstance(value, list | tuple):
                raise RecordSerdeError(f"Cannot write the {path}: expected an array, got {value!r}.")
            for v in value:
                if fd.message_type is not None:
                    _set_message(target.add(), v, it, path)
                else:
                    target.append(_scalar(fd, _item_default(fd) if v is None else v, path))
        elif fd.message_type is not None:
            _set_message(getattr(message, fd.name), value, t, path)
        else:
            setattr(message, fd.name, _scalar(fd, value, path))


def _is_map(fd: Any) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def _item_default(fd: Any) -> Any:
    return fd.default_value


def _set_message(target: Any, value: Any, t: T.SqlType | None, where: str) -> None:
    full = target.DESCRIPTOR.full_name
    try:
        if value is None:
            target.SetInParent()
        elif full in _WRAPPER_NAMES:
            target.value = _scalar(target.DESCRIPTOR.fields_by_name["value"], value, where)
        elif full == TIMESTAMP_TYPE:
            millis = int(value)
            target.seconds, target.nanos = millis // 1000, (millis % 1000) * 1_000_000
        elif full == DATE_TYPE:
            from engine.serde.coerce import date_from_days

            day = date_from_days(int(value))
            target.year, target.month, target.day = day.year, day.month, day.day
        elif full == TIME_TYPE:
            millis = int(value)
            target.hours, rest = divmod(millis, 3_600_000)
            target.minutes, rest = divmod(rest, 60_000)
            target.seconds, rest = divmod(rest, 1000)
            target.nanos = rest * 1_000_000
        elif full == DECIMAL_TYPE:
            d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
            scale = t.scale if isinstance(t, T.Decimal) else max(0, -int(d.as_tuple().exponent))
            unscaled = int(d.scaleb(scale).to_integral_value(decimal.ROUND_HALF_UP))
            length = max(1, (unscaled.bit_length() + 8) // 8)
            target.value = unscaled.to_bytes(length, "big", signed=True)
            if isinstance(t, T.Decimal):
                target.precision = t.precision
            target.scale = scale
        else:
            if not isinstance(value, Mapping):
                raise RecordSerdeError(f"Cannot write the {where}: expected an object, got {value!r}.")
            types = {f.name: f.type for f in t.fields} if isinstance(t, T.Struct) else {}
            _fill(target, value, types, where)
            target.SetInParent()
    except (TypeError, ValueError, OverflowError, decimal.InvalidOperation) as exc:
        raise RecordSerdeError(f"Cannot write the {where} as {full}: {value!r} ({exc}).") from None


def _scalar(fd: Any, value: Any, where: str) -> Any:
    kind = fd.type
    try:
        if kind == fd.TYPE_ENUM:
            if isinstance(value, str):
                enum_value = fd.enum_type.values_by_name.get(value)
                if enum_value is None:
                    raise RecordSerdeError(
                        f"Cannot write the {where}: '{value}' is not a value of the enum {fd.enum_type.full_name}."
                    )
                return enum_value.number
            return int(value)
        if kind == fd.TYPE_BOOL:
            if not isinstance(value, bool):
                raise TypeError("not a boolean")
            return value
        if kind in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
            return float(value)
        if kind == fd.TYPE_STRING:
            return value if isinstance(value, str) else str(value)
        if kind == fd.TYPE_BYTES:
            return base64.b64decode(value) if isinstance(value, str) else bytes(value)
        if isinstance(value, bool):
            raise TypeError("a boolean is not an integer")
        return int(value)
    except RecordSerdeError:
        raise
    except (TypeError, ValueError, OverflowError, decimal.InvalidOperation) as exc:
        raise RecordSerdeError(f"Cannot write the {where}: {value!r} ({exc}).") from None


# -- message -> QTT form


def _read_message(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd in message.DESCRIPTOR.fields:
        value = getattr(message, fd.name)
        if _is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {str(k): _read_value(value_fd, v) for k, v in value.items()}
        elif fd.is_repeated:
            out[fd.name] = [_read_value(fd, v) for v in value]
        elif fd.has_presence and not message.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _read_value(fd, value)
    return out


def _read_value(fd: Any, value: Any) -> Any:
    if fd.message_type is not None:
        full = fd.message_type.full_name
        if full in _WRAPPER_NAMES:
            return _read_value(fd.message_type.fields_by_name["value"], value.value)
        if full == TIMESTAMP_TYPE:
            return value.seconds * 1000 + value.nanos // 1_000_000
        if full == DATE_TYPE:
            import datetime as dt

            from engine.serde.coerce import date_to_days

            try:
                return date_to_days(dt.date(value.year, value.month, value.day))
            except ValueError as exc:
                raise RecordSerdeError(f"The protobuf field {fd.name} is not a valid date: {exc}.") from None
        if full == TIME_TYPE:
            return ((value.hours * 60 + value.minutes) * 60 + value.seconds) * 1000 + value.nanos // 1_000_000
        if full == DECIMAL_TYPE:
            unscaled = int.from_bytes(value.value, "big", signed=True) if value.value else 0
            return decimal.Decimal(unscaled).scaleb(-value.scale)
        return _read_message(value)
    if fd.type == fd.TYPE_ENUM:
        enum_value = fd.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if fd.type == fd.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value

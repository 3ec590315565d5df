"""Protobuf schemas in the registry: ``.proto`` text (parsed with ``proto-schema-parser``, syntax
errors fatal) or, as confluent-kafka-python's serializer sends it, a base64
``FileDescriptorProto`` (``protobuf``).

The stored form is what was registered, trimmed (no re-printing: a descriptor stays base64, so
``GET /schemas/ids/{id}?format=serialized`` hands a Python client back the descriptor it sent).

Compatibility compares the messages by full name and their fields by number (``read_compatibility
(writer)``: can a reader with this schema parse what the writer's schema wrote?):

* a message of the writer missing in the reader: MESSAGE_REMOVED;
* the package changed: PACKAGE_CHANGED;
* a field number whose type moved to another wire-compatible group (int32/int64/uint32/uint64/
  bool/enum; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64; string/bytes; float; double;
  a message type): FIELD_KIND_CHANGED or FIELD_SCALAR_KIND_CHANGED; another message type:
  FIELD_NAMED_TYPE_CHANGED;
* repeated on one side only: FIELD_LABEL_CHANGED.

Added and removed fields are compatible (unknown fields are skipped, missing ones default).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["ProtobufSchema", "parse_protobuf"]

Fields = dict[int, tuple[str, bool]]  # number -> (type, repeated)

_GROUPS = {
    **dict.fromkeys(["int32", "int64", "uint32", "uint64", "bool", "enum"], "varint"),
    **dict.fromkeys(["sint32", "sint64"], "zigzag"),
    **dict.fromkeys(["fixed32", "sfixed32"], "fixed32"),
    **dict.fromkeys(["fixed64", "sfixed64"], "fixed64"),
    **dict.fromkeys(["string", "bytes"], "length"),
    "float": "float",
    "double": "double",
}
_B64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(
        self, canonical: str, package: str, messages: dict[str, Fields], enums: set[str]
    ) -> None:
        self.canonical = canonical
        self.package = package
        self.messages = messages
        self.enums = enums

    def normalized(self) -> str:
        return self.canonical

    def _group(self, t: str) -> str:
        if t in _GROUPS:
            return _GROUPS[t]
        short = t.rsplit(".", 1)[-1]
        return "varint" if short in self.enums or t in self.enums else "message:" + short

    def read_compatibility(self, writer: Any) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return ["{errorType:'TYPE_MISMATCH', description:'not a Protobuf schema'}"]
        out: list[str] = []
        if writer.package != self.package:
            out.append(
                f"{{errorType:'PACKAGE_CHANGED', description:'The package changed from '{writer.package}' to '{self.package}''}}"
            )
        for name, wfields in writer.messages.items():
            rfields = self.messages.get(name)
            if rfields is None:
                out.append(
                    f"{{errorType:'MESSAGE_REMOVED', description:'The message '{name}' was removed', additionalInfo:'#/{name}'}}"
                )
                continue
            for number, (wtype, wrep) in sorted(wfields.items()):
                if number not in rfields:
                    continue
                rtype, rrep = rfields[number]
                path = f"#/{name}/{number}"
                rg, wg = self._group(rtype), writer._group(wtype)
                if rg != wg:
                    kind = (
                        "FIELD_NAMED_TYPE_CHANGED"
                        if rg.startswith("message:") and wg.startswith("message:")
                        else "FIELD_SCALAR_KIND_CHANGED"
                        if not rg.startswith("message:") and not wg.startswith("message:")
                        else "FIELD_KIND_CHANGED"
                    )
                    out.append(
                        f"{{errorType:'{kind}', description:'The type of field {number} of '{name}' changed from {wtype} to {rtype}', additionalInfo:'{path}'}}"
                    )
                elif rrep != wrep:
                    out.append(
                        f"{{errorType:'FIELD_LABEL_CHANGED', description:'Field {number} of '{name}' became {'repeated' if rrep else 'singular'}', additionalInfo:'{path}'}}"
                    )
        return out


def parse_protobuf(text: str, references: Sequence[str] = ()) -> ProtobufSchema:
    """``ValueError`` with the parser's reason when ``text`` is neither valid .proto text nor a
    base64 FileDescriptorProto. ``references`` (imported files) add their enums to the known
    names; their messages are compared where they are registered."""
    stripped = text.strip()
    enums: set[str] = set()
    for ref in references:
        with contextlib.suppress(ValueError):
            enums |= _parse(ref.strip())[2]
    package, messages, own_enums = _parse(stripped)
    return ProtobufSchema(stripped, package, messages, own_enums | enums)


def _parse(text: str) -> tuple[str, dict[str, Fields], set[str]]:
    if _B64.match(text) and "{" not in text:
        try:
            return _from_descriptor(base64.b64decode(text, validate=False))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"Invalid schema {text[:80]}, details: {exc}") from None
    return _from_text(text)


def _from_descriptor(data: bytes) -> tuple[str, dict[str, Fields], set[str]]:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    fdp = descriptor_pb2.FileDescriptorProto()
    try:
        fdp.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(f"not a FileDescriptorProto: {exc}") from None
    if not fdp.message_type and not fdp.enum_type:
        raise ValueError("a FileDescriptorProto without messages or enums")
    messages: dict[str, Fields] = {}
    enums = {e.name for e in fdp.enum_type}
    type_names = descriptor_pb2.FieldDescriptorProto.Type

    def walk(msg: Any, prefix: str) -> None:
        name = f"{prefix}{msg.name}"
        enums.update(f"{name}.{e.name}" for e in msg.enum_type)
        enums.update(e.name for e in msg.enum_type)
        fields: Fields = {}
        for f in msg.field:
            kind = type_names.Name(f.type)[len("TYPE_") :].lower()
            t = f.type_name.lstrip(".") if kind in ("message", "enum", "group") else kind
            fields[f.number] = (t, f.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
        messages[name] = fields
        for nested in msg.nested_type:
            walk(nested, name + ".")

    pkg = fdp.package
    for msg in fdp.message_type:
        walk(msg, f"{pkg}." if pkg else "")
    return pkg, messages, enums


def _from_text(text: str) -> tuple[str, dict[str, Fields], set[str]]:
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    class _Raise(ErrorListener):  # type: ignore[misc, unused-ignore]  # antlr4 is untyped
        def syntaxError(
            self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
        ) -> None:
            raise ValueError(f"line {line}:{column} {msg}")

    def strict(x: Any) -> None:
        x.removeErrorListeners()
        x.addErrorListener(_Raise())

    try:
        tree = Parser(setup_lexer=strict, setup_parser=strict).parse(text)
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"Invalid schema {text[:80]}, details: {exc}") from None
    package = ""
    messages: dict[str, Fields] = {}
    enums: set[str] = set()

    def walk(msg: Any, prefix: str) -> None:
        name = f"{prefix}{msg.name}"
        fields: Fields = {}

        def collect(elements: Sequence[Any]) -> None:
            for el in elements:
                if isinstance(el, ast.Field):
                    repeated = el.cardinality is not None and el.cardinality.name == "REPEATED"
                    fields[el.number] = (el.type.lstrip("."), repeated)
                elif isinstance(el, ast.MapField):
                    fields[el.number] = (f"map<{el.key_type},{el.value_type}>", True)
                elif isinstance(el, ast.OneOf):
                    collect(el.elements)
                elif isinstance(el, ast.Enum):
                    enums.update({el.name, f"{name}.{el.name}"})

        collect(msg.elements)
        messages[name] = fields
        for el in msg.elements:
            if isinstance(el, ast.Message):
                walk(el, name + ".")

    for el in tree.file_elements:
        if isinstance(el, ast.Package):
            package = el.name
    for el in tree.file_elements:
        if isinstance(el, ast.Message):
            walk(el, f"{package}." if package else "")
        elif isinstance(el, ast.Enum):
            enums.add(el.name)
    if not messages and not enums:
        raise ValueError(f"Invalid schema {text[:80]}, details: no message or enum")
    return package, messages, enums

"""The REST API's exact answers: content type, bodies, Confluent's error codes and messages."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer

from .conftest import RegistryBroker

CT = "application/vnd.schemaregistry.v1+json"
REC = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
REC_STORED = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'


def _s() -> str:
    return f"rest-{uuid.uuid4().hex[:8]}"


def _register(r: RegistryBroker, subject: str, schema: object, **extra: object) -> int:
    status, ctype, body = r.call(
        "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema), **extra}
    )
    assert (status, ctype) == (200, CT), body
    return int(body["id"])


def test_root_types_and_unknown_paths(registry: RegistryBroker) -> None:
    assert registry.call("GET", "/") == (200, CT, {})
    assert registry.call("GET", "/schemas/types") == (200, CT, ["JSON", "PROTOBUF", "AVRO"])
    assert registry.call("GET", "/nope") == (
        404,
        CT,
        {"error_code": 404, "message": "HTTP 404 Not Found"},
    )
    assert registry.call("PATCH", "/subjects") == (
        405,
        CT,
        {"error_code": 405, "message": "HTTP 405 Method Not Allowed"},
    )
    status, _ct, body = registry.call("GET", "/v1/metadata/id")
    assert status == 200 and body["scope"]["clusters"]["kafka-cluster"]
    assert registry.call("GET", "/contexts") == (200, CT, ["."])
    assert set(registry.call("GET", "/v1/metadata/version")[2]) == {"version", "commitId"}


def test_register_get_and_raw_schema(registry: RegistryBroker) -> None:
    subject = _s()
    sid = _register(registry, subject, REC)
    assert registry.call("GET", f"/schemas/ids/{sid}") == (200, CT, {"schema": REC_STORED})
    status, _ct, raw = registry.call("GET", f"/schemas/ids/{sid}/schema")
    assert (status, raw) == (200, json.loads(REC_STORED))
    assert registry.call("GET", f"/subjects/{subject}/versions/1") == (
        200,
        CT,
        {"subject": subject, "version": 1, "id": sid, "schema": REC_STORED},
    )
    assert registry.call("GET", f"/subjects/{subject}/versions/latest")[2]["version"] == 1
    assert registry.call("GET", f"/subjects/{subject}/versions/-1")[2]["version"] == 1
    assert registry.call("GET", f"/schemas/ids/{sid}/versions")[2] == [
        {"subject": subject, "version": 1}
    ]
    assert subject in registry.call("GET", "/subjects")[2]
    assert registry.call("GET", f"/subjects?subjectPrefix={subject}")[2] == [subject]
    listed = registry.call("GET", f"/schemas?subjectPrefix={subject}")[2]
    assert listed == [{"subject": subject, "version": 1, "id": sid, "schema": REC_STORED}]


def test_errors_exactly_confluents(registry: RegistryBroker) -> None:
    subject = _s()
    assert registry.call("GET", f"/subjects/{subject}/versions") == (
        404,
        CT,
        {"error_code": 40401, "message": f"Subject '{subject}' not found."},
    )
    assert registry.call("GET", "/schemas/ids/424242") == (
        404,
        CT,
        {"error_code": 40403, "message": "Schema 424242 not found"},
    )
    _register(registry, subject, REC)
    assert registry.call("GET", f"/subjects/{subject}/versions/7") == (
        404,
        CT,
        {"error_code": 40402, "message": "Version 7 not found."},
    )
    assert registry.call("GET", f"/subjects/{subject}/versions/zero") == (
        422,
        CT,
        {
            "error_code": 42202,
            "message": "The specified version 'zero' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"',
        },
    )
    assert registry.call("PUT", "/config", {"compatibility": "bogus"})[:2] == (422, CT)
    assert registry.call("PUT", "/config", {"compatibility": "bogus"})[2]["error_code"] == 42203
    assert registry.call("PUT", "/mode", {"mode": "bogus"})[2] == {
        "error_code": 42204,
        "message": "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.",
    }
    status, _ct, body = registry.call(
        "POST", f"/subjects/{subject}/versions", {"schema": "{not json"}
    )
    assert (status, body["error_code"]) == (422, 42201)
    assert set(body) == {"error_code", "message"}
    status, _ct, body = registry.call("POST", f"/subjects/{subject}/versions", raw=b"{oops")
    assert (status, set(body)) == (400, {"error_code", "message"})


def test_incompatible_409_and_verbose(registry: RegistryBroker) -> None:
    subject = _s()
    _register(registry, subject, REC)
    bad = {**REC, "fields": [*REC["fields"], {"name": "b", "type": "string"}]}  # type: ignore[list-item]
    status, ctype, body = registry.call(
        "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(bad)}
    )
    assert (status, ctype, set(body), body["error_code"]) == (
        409,
        CT,
        {"error_code", "message"},
        40901,
    )
    assert body["message"].startswith(
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        "details: [{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'"
    )
    path = f"/compatibility/subjects/{subject}/versions/latest"
    assert registry.call("POST", path, {"schema": json.dumps(bad)}) == (
        200,
        CT,
        {"is_compatible": False},
    )
    status, _ct, body = registry.call("POST", path + "?verbose=true", {"schema": json.dumps(bad)})
    assert (
        body["is_compatible"] is False
        and "READER_FIELD_MISSING_DEFAULT_VALUE" in body["messages"][0]
    )
    good = {**REC, "fields": [*REC["fields"], {"name": "b", "type": "string", "default": ""}]}  # type: ignore[list-item]
    assert registry.call(
        "POST",
        f"/compatibility/subjects/{subject}/versions?verbose=true",
        {"schema": json.dumps(good)},
    ) == (
        200,
        CT,
        {"is_compatible": True, "messages": []},
    )


def test_config_default_to_global(registry: RegistryBroker) -> None:
    subject = _s()
    _register(registry, subject, REC)
    assert registry.call("GET", f"/config/{subject}")[2] == {
        "error_code": 40408,
        "message": f"Subject '{subject}' does not have subject-level compatibility configured",
    }
    assert registry.call("GET", f"/config/{subject}?defaultToGlobal=true")[2] == {
        "compatibilityLevel": "BACKWARD"
    }
    assert registry.call("PUT", f"/config/{subject}", {"compatibility": "full"})[2] == {
        "compatibility": "FULL"
    }
    assert registry.call("GET", f"/config/{subject}")[2] == {"compatibilityLevel": "FULL"}
    assert registry.call("DELETE", f"/config/{subject}")[2] == {"compatibilityLevel": "FULL"}
    assert registry.call("GET", f"/mode/{subject}")[2]["error_code"] == 40409
    assert registry.call("GET", f"/mode/{subject}?defaultToGlobal=true")[2] == {"mode": "READWRITE"}


def test_normalize_and_deleted_listing(registry: RegistryBroker) -> None:
    subject = _s()
    spaced = '{"type":"record","name":"n.N","doc":"first","fields":[{"name":"a","type":"int"}]}'
    other = '{"type":"record","name":"N","namespace":"n","doc":"second","fields":[{"name":"a","type":"int"}]}'
    _status, _ct, body = registry.call(
        "POST", f"/subjects/{subject}/versions?normalize=true", {"schema": spaced}
    )
    sid = body["id"]
    # equal once normalized: the same version
    assert registry.call("POST", f"/subjects/{subject}/versions?normalize=true", {"schema": other})[
        2
    ] == {"id": sid}
    assert (
        registry.call("POST", f"/subjects/{subject}?normalize=true", {"schema": other})[2][
            "version"
        ]
        == 1
    )
    assert registry.call("DELETE", f"/subjects/{subject}/versions/1")[2] == 1
    assert registry.call("GET", f"/subjects/{subject}/versions?deleted=true")[2] == [1]
    assert registry.call("GET", f"/subjects/{subject}/versions/1?deleted=true")[2]["id"] == sid
    assert subject in registry.call("GET", "/subjects?deletedOnly=true")[2]
    assert subject not in registry.call("GET", "/subjects")[2]
    assert registry.call("DELETE", f"/subjects/{subject}/versions/1")[2] == {
        "error_code": 40406,
        "message": f"Subject '{subject}' Version 1 was soft deleted.Set permanent=true to delete permanently",
    }


def test_references(registry: RegistryBroker) -> None:
    base, user = _s(), _s()
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "r",
        "fields": [{"name": "city", "type": "string"}],
    }
    _register(registry, base, address)
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "r",
        "fields": [{"name": "home", "type": "r.Address"}],
    }
    refs = [{"name": "r.Address", "subject": base, "version": 1}]
    pid = _register(registry, user, person, references=refs)
    assert registry.call("GET", f"/schemas/ids/{pid}")[2]["references"] == refs
    assert registry.call("GET", f"/subjects/{base}/versions/1/referencedby")[2] == [pid]
    assert registry.call("DELETE", f"/subjects/{base}/versions/1")[2]["error_code"] == 42206
    status, _ct, body = registry.call(
        "POST", f"/subjects/{_s()}/versions", {"schema": json.dumps(person)}
    )
    assert (status, body["error_code"]) == (422, 42201)  # Address unknown without the reference


def test_json_schema(registry: RegistryBroker) -> None:
    subject = _s()
    v1 = {"type": "object", "properties": {"a": {"type": "string"}}}
    sid = _register(registry, subject, v1, schemaType="JSON")
    assert registry.call("GET", f"/schemas/ids/{sid}")[2] == {
        "schemaType": "JSON",
        "schema": json.dumps(v1, separators=(",", ":")),
    }
    narrowed = {"type": "object", "properties": {"a": {"type": "integer"}}}
    status, _ct, body = registry.call(
        "POST",
        f"/subjects/{subject}/versions",
        {"schema": json.dumps(narrowed), "schemaType": "JSON"},
    )
    assert (status, body["error_code"]) == (409, 40901)
    status, _ct, body = registry.call(
        "POST", f"/subjects/{subject}/versions", {"schema": '{"type": 5}', "schemaType": "JSON"}
    )
    assert (status, body["error_code"]) == (422, 42201)


def test_schemas_topic_in_confluents_format(registry: RegistryBroker) -> None:
    subject = _s()
    sid = _register(registry, subject, REC)
    consumer = Consumer(
        {
            "bootstrap.servers": registry.bootstrap_servers,
            "group.id": f"g-{subject}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["_schemas"])
    wanted = json.dumps(
        {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}, separators=(",", ":")
    ).encode()
    found = None
    try:
        for _ in range(300):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None and msg.key() == wanted:
                found = json.loads(msg.value())
                break
    finally:
        consumer.close()
    assert found == {
        "subject": subject,
        "version": 1,
        "id": sid,
        "schema": REC_STORED,
        "deleted": False,
    }


def test_read_only_modes(registry: RegistryBroker) -> None:
    subject = _s()
    _register(registry, subject, REC)
    assert registry.call("PUT", f"/mode/{subject}", {"mode": "READWRITE"})[2] == {
        "mode": "READWRITE"
    }
    assert registry.call("PUT", "/mode", {"mode": "READONLY_OVERRIDE"})[2] == {
        "mode": "READONLY_OVERRIDE"
    }
    try:
        # READONLY_OVERRIDE wins over the subject's READWRITE
        body = {"schema": json.dumps({**REC, "name": "Other"})}
        status, _ct, answer = registry.call("POST", f"/subjects/{subject}/versions", body)
        assert (status, answer) == (
            422,
            {
                "error_code": 42205,
                "message": f"Subject {subject} in context . is in read-only mode",
            },
        )
        assert registry.call("PUT", "/config", {"compatibility": "NONE"})[2] == {
            "error_code": 42205,
            "message": "Subject null in context . is in read-only mode",
        }
        # a missing version is reported before the mode, as Confluent orders its checks
        assert registry.call("DELETE", f"/subjects/{subject}/versions/9")[2]["error_code"] == 40402
        assert registry.call("GET", f"/subjects/{subject}/versions/1")[0] == 200  # reads go on
    finally:
        assert registry.call("PUT", "/mode", {"mode": "READWRITE"})[0] == 200
        registry.call("DELETE", f"/mode/{subject}")
    assert registry.call("GET", "/mode")[2] == {"mode": "READWRITE"}


def test_body_over_the_limit(registry: RegistryBroker) -> None:
    huge = json.dumps({"schema": json.dumps({**REC, "doc": "x" * (2 << 20)})}).encode()
    status, ctype, body = registry.call("POST", f"/subjects/{_s()}/versions", raw=huge)
    assert (status, ctype, body) == (
        413,
        CT,
        {"error_code": 413, "message": "request body too large"},
    )


def test_normalize_config(registry: RegistryBroker) -> None:
    subject = _s()
    assert registry.call("PUT", f"/config/{subject}", {"normalize": True})[2] == {"normalize": True}
    assert registry.call("PUT", f"/config/{subject}", {"compatibility": "FULL"})[2] == {
        "compatibility": "FULL",
        "normalize": True,
    }  # merged over what was there
    assert registry.call("GET", f"/config/{subject}")[2] == {
        "normalize": True,
        "compatibilityLevel": "FULL",
    }
    a = '{"type":"record","name":"q.Q","fields":[{"name":"a","type":"int"}]}'
    b = '{"type":"record","name":"Q","namespace":"q","fields":[{"name":"a","type":"int","doc":"x"}]}'
    first = registry.call("POST", f"/subjects/{subject}/versions", {"schema": a})[2]["id"]
    # no ?normalize=true: the subject's config normalizes
    assert registry.call("POST", f"/subjects/{subject}/versions", {"schema": b})[2] == {"id": first}
    assert registry.call("GET", f"/subjects/{subject}/versions")[2] == [1]
    assert registry.call("DELETE", f"/config/{subject}")[2] == {
        "normalize": True,
        "compatibilityLevel": "FULL",
    }
    assert registry.call("GET", f"/config/{subject}")[2]["error_code"] == 40408


def test_delete_latest(registry: RegistryBroker) -> None:
    subject = _s()
    _register(registry, subject, REC)
    assert registry.call("DELETE", f"/subjects/{subject}/versions/latest")[2] == 1
    # permanent: "latest" counts the soft-deleted version
    assert registry.call("DELETE", f"/subjects/{subject}/versions/latest?permanent=true")[2] == 1
    assert registry.call("GET", f"/subjects/{subject}/versions?deleted=true")[2]["error_code"] == 40401


def test_permanent_subject_delete_takes_config_and_mode(registry: RegistryBroker) -> None:
    subject = _s()
    _register(registry, subject, REC)
    registry.call("PUT", f"/config/{subject}", {"compatibility": "NONE"})
    registry.call("PUT", f"/mode/{subject}", {"mode": "READWRITE"})
    assert registry.call("DELETE", f"/subjects/{subject}")[2] == [1]
    assert registry.call("GET", f"/config/{subject}")[2] == {"compatibilityLevel": "NONE"}  # soft: kept
    assert registry.call("DELETE", f"/subjects/{subject}?permanent=true")[2] == [1]
    assert registry.call("GET", f"/config/{subject}")[2]["error_code"] == 40408
    assert registry.call("GET", f"/mode/{subject}")[2]["error_code"] == 40409


def test_import_mode(registry: RegistryBroker) -> None:
    subject = _s()
    body = {"schema": json.dumps({**REC, "name": "Imported"}), "id": 50_000, "version": 3}
    status, _ct, answer = registry.call("POST", f"/subjects/{subject}/versions", body)
    assert (status, answer["error_code"]) == (422, 42205)  # an id outside IMPORT mode
    assert registry.call("PUT", f"/mode/{subject}", {"mode": "IMPORT"})[2] == {"mode": "IMPORT"}
    assert registry.call("POST", f"/subjects/{subject}/versions", body)[2] == {"id": 50_000}
    assert registry.call("GET", f"/subjects/{subject}/versions")[2] == [3]
    # the same id with another schema is refused
    other = {**body, "schema": json.dumps({**REC, "name": "Else"}), "version": 4}
    assert registry.call("POST", f"/subjects/{subject}/versions", other)[2]["error_code"] == 42207
    registry.call("DELETE", f"/mode/{subject}")
    assert _register(registry, _s(), {**REC, "name": "AfterImport"}) > 50_000  # ids continue above

"""``/brokers/ids/<id>`` as Kafka writes and reads it (``BrokerIdZNode``, version 5): every
endpoint, the listener security protocol map, host and port of the first PLAINTEXT endpoint
(null and -1 without one); the address brokers reach each other on is the inter-broker
listener's endpoint."""

from __future__ import annotations

import json

from odradek.cluster.znodes import BrokerInfo, EndPoint


def test_every_endpoint_and_kafkas_host_port_rule() -> None:
    info = BrokerInfo(
        1,
        "10.0.0.1",
        9093,
        rack="r1",
        listener="INTERNAL",
        endpoints=(
            EndPoint("10.0.0.1", 9093, "INTERNAL", "SASL_SSL"),
            EndPoint("public.example", 9092, "EXTERNAL", "SSL"),
            EndPoint("::1", 9094, "LOCAL", "PLAINTEXT"),
        ),
    )
    data = json.loads(info.to_json())
    assert data["version"] == 5 and data["rack"] == "r1" and data["features"] == {}
    assert data["endpoints"] == [
        "INTERNAL://10.0.0.1:9093",
        "EXTERNAL://public.example:9092",
        "LOCAL://[::1]:9094",
    ]
    assert data["listener_security_protocol_map"] == {
        "INTERNAL": "SASL_SSL",
        "EXTERNAL": "SSL",
        "LOCAL": "PLAINTEXT",
    }
    assert (data["host"], data["port"]) == ("::1", 9094)  # the PLAINTEXT one

    back = BrokerInfo.from_json(1, info.to_json(), 77, "INTERNAL")
    assert (back.host, back.port, back.listener, back.epoch) == ("10.0.0.1", 9093, "INTERNAL", 77)
    assert back.endpoints == info.endpoints
    external = BrokerInfo.from_json(1, info.to_json(), 77, "EXTERNAL")
    assert (external.host, external.port) == ("public.example", 9092)


def test_no_plaintext_endpoint_and_older_versions() -> None:
    secure = BrokerInfo(
        2, "h", 9093, listener="SASL_SSL", endpoints=(EndPoint("h", 9093, "SASL_SSL", "SASL_SSL"),)
    )
    data = json.loads(secure.to_json())
    assert data["host"] is None and data["port"] == -1
    assert "rack" not in data
    # version 1 (host and port only) and version 2 (endpoints, no protocol map)
    v1 = BrokerInfo.from_json(3, b'{"version":1,"host":"a","port":1,"jmx_port":-1}', 5)
    assert (v1.host, v1.port, v1.listener) == ("a", 1, "PLAINTEXT")
    v2 = BrokerInfo.from_json(4, b'{"version":2,"host":"b","port":2,"endpoints":["SSL://b:3"]}', 5)
    assert v2.endpoints == (EndPoint("b", 3, "SSL", "SSL"),)
    # without endpoints a broker has one PLAINTEXT listener at its address
    plain = json.loads(BrokerInfo(5, "c", 4).to_json())
    assert plain["endpoints"] == ["PLAINTEXT://c:4"] and (plain["host"], plain["port"]) == ("c", 4)

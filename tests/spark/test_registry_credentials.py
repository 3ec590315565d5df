"""The Spark source against a schema registry that wants Basic auth over HTTPS: the options
``schema.registry.basic.auth.user.info`` and ``schema.registry.ssl.ca.location`` reach the
registry client on the driver and on the executors; without them the query fails naming 401;
an option without ``schema.registry.url`` is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType
from tests.certs import Certs, make_certs
from tests.console.secured import PASSWORDS, Secured, allow, create_topics, running_secured_broker

from odradek.client.avro import AvroSerializer, SchemaRegistryClient
from odradek.spark.options import OptionError, parse_source_options

pytestmark = pytest.mark.timeout(110)

CLICK = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "int"}],
}
TOPIC = "alice-clicks"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    certs: Certs = make_certs(tmp_path_factory.mktemp("certs"))
    for s in running_secured_broker(certs):
        allow(s, "alice", ResourceType.TOPIC, "alice-", AclOperation.ALL, ResourcePatternType.PREFIXED)
        yield s


def credentials(s: Secured) -> dict[str, str]:
    return {
        "schema.registry.basic.auth.user.info": f"alice:{PASSWORDS['alice']}",
        "schema.registry.ssl.ca.location": str(s.certs.ca_pem),
    }


def read(spark: Any, s: Secured, **options: str) -> Any:
    r = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", s.bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("value.format", "avro")
        .option("schema.registry.url", s.registry)
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_typed_read_with_credentials_and_401_without(spark: Any, secured: Secured) -> None:
    create_topics(secured, TOPIC)
    config = {k.removeprefix("schema.registry."): v for k, v in credentials(secured).items()}
    ser = AvroSerializer(SchemaRegistryClient(secured.registry, config=config), CLICK, topic=TOPIC)
    producer = Producer({"bootstrap.servers": secured.bootstrap_servers})
    for i in range(20):
        producer.produce(TOPIC, ser({"page": f"/p{i}", "n": i}))
    assert producer.flush(30) == 0

    df = read(spark, secured, **credentials(secured))
    assert df.schema["value"].dataType.simpleString() == "struct<page:string,n:int>"
    rows = df.select("value.page", "value.n").orderBy("n").collect()
    assert [(r.page, r.n) for r in rows] == [(f"/p{i}", i) for i in range(20)]

    with pytest.raises(Exception, match="401 Unauthorized") as info:
        read(spark, secured, **{"schema.registry.ssl.ca.location": str(secured.certs.ca_pem)})
    assert "no credentials were sent" in str(info.value)


def test_registry_settings_need_the_url() -> None:
    with pytest.raises(OptionError, match=r"needs 'schema\.registry\.url'"):
        parse_source_options(
            {
                "kafka.bootstrap.servers": "127.0.0.1:9092",
                "subscribe": "t",
                "schema.registry.basic.auth.user.info": "a:b",
            },
            streaming=False,
        )
    with pytest.raises(OptionError, match=r"basic\.auth\.credentials\.source"):
        parse_source_options(
            {
                "kafka.bootstrap.servers": "127.0.0.1:9092",
                "subscribe": "t",
                "value.format": "avro",
                "schema.registry.url": "http://127.0.0.1:8081",
                "schema.registry.basic.auth.credentials.source": "SASL_INHERIT",
            },
            streaming=False,
        )

"""Client telemetry (KIP-714) with a real client: librdkafka 2.16 (confluent-kafka), whose
``enable.metrics.push`` is on by default, pushes its producer and consumer metrics to the
broker; the broker decodes them and shows them on /metrics and the console's Clients page."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest

from broker.wire import Wire, req
from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(90)

CLIENT_METRICS = 16
INTERVAL_MS = 500


@pytest.fixture(scope="module")
def telemetry_broker() -> Iterator[tuple[BrokerProcess, str]]:
    settings = {"num.partitions": 1, "http.listeners": "http://127.0.0.1:0"}
    with BrokerProcess(settings, log_level="info") as broker:
        with Wire(broker.bootstrap_servers) as w:
            ops = tuple(
                req(44, 1, "AlterableConfig", name=k, config_operation=0, value=v)
                for k, v in (
                    ("metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer."),
                    ("interval.ms", str(INTERVAL_MS)),
                )
            )
            res = req(
                44,
                1,
                "AlterConfigsResource",
                resource_type=CLIENT_METRICS,
                resource_name="every-client",
                configs=ops,
            )
            r = w.call(req(44, 1, resources=(res,), validate_only=False))
            assert int(r.responses[0].error_code) == 0
        yield broker, broker.console_url()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def _series(text: str, client_id: str, name: str) -> list[float]:
    """Values of ``odradek_client_metric`` for (client id, metric name), one per instance."""
    out = []
    for labels, value in re.findall(
        r"^odradek_client_metric\{([^}]*)\} (\S+)$", text, re.MULTILINE
    ):
        got = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if got.get("client_id") == client_id and got.get("name") == name:
            assert re.fullmatch(r"[0-9a-f-]{36}", got["client_instance_id"]), got
            out.append(float(value))
    return out


def _await_series(
    url: str, client_id: str, name: str, tick: Callable[[], object], timeout_s: float = 30.0
) -> float:
    """The value /metrics shows for (client id, metric), once it appears; the text is
    rendered at most every 5 s, so it may take a few scrapes. ``tick`` serves the client."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        tick()
        text = _get(f"{url}/metrics")
        values = _series(text, client_id, name)
        if values:
            return values[0]
    found = [line for line in text.splitlines() if line.startswith("odradek_client_metric{")]
    raise AssertionError(f"{name} of {client_id} never appeared on /metrics; found {found}")


def test_producer_metrics_reach_metrics_and_the_clients_page(
    telemetry_broker: tuple[BrokerProcess, str],
) -> None:
    broker, url = telemetry_broker
    client_id = f"telemetry-producer-{uuid.uuid4().hex[:6]}"
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "client.id": client_id}
    )
    topic = f"telemetry-{uuid.uuid4().hex[:6]}"
    for i in range(200):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(15) == 0
    latency = _await_series(
        url,
        client_id,
        "org.apache.kafka.producer.node.request.latency.avg",
        lambda: producer.poll(0.2),
    )
    assert latency >= 0
    text = _get(f"{url}/metrics")
    assert _series(text, client_id, "org.apache.kafka.producer.record.queue.time.max")
    assert re.search(r"^kafka_server_clientmetrics_instance_count [1-9]", text, re.MULTILINE)
    page = _get(f"{url}/clients")
    assert client_id in page and "org.apache.kafka.producer.node.request.latency.avg" in page
    producer.flush(5)


def test_consumer_metrics_reach_metrics(telemetry_broker: tuple[BrokerProcess, str]) -> None:
    broker, url = telemetry_broker
    topic = f"telemetry-c-{uuid.uuid4().hex[:6]}"
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "enable.metrics.push": False}
    )
    for i in range(20):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(15) == 0
    client_id = f"telemetry-consumer-{uuid.uuid4().hex[:6]}"
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        _await_series(
            url,
            client_id,
            "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
            lambda: consumer.poll(0.2),
        )
    finally:
        consumer.close()

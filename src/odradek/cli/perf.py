"""`odradek perf produce|consume`: throughput and latency tests (like Kafka's
kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh), using odradek.client.

    odradek perf produce --topic T --num-records 1000000 --record-size 100 --throughput -1 \
        -X linger.ms=5 -X batch.size=262144
    odradek perf consume --topic T --messages 1000000

Produce latency is send -> acknowledgement, measured on a sample of records (at most ~100k
per run). Throughput -1 means unthrottled.
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import os
import time
from typing import Annotated, Any

import typer

from ._clientopts import (
    BOOTSTRAP_HELP,
    DEFAULT_BOOTSTRAP,
    CommandConfig,
    fail,
    load_command_config,
    parse_props,
)

__all__ = ["app", "percentile"]

app = typer.Typer(no_args_is_help=True, add_completion=False)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help=BOOTSTRAP_HELP)]
Props = Annotated[list[str] | None, typer.Option("--property", "-X", help="Client config key=value, repeatable.")]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]


def _progress(total: int, quiet: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        disable=quiet,
        transient=True,
    )


@app.command()
def produce(
    topic: Annotated[str, typer.Option("--topic", "-t", help="Topic to produce to.")],
    num_records: Annotated[int, typer.Option("--num-records", "-n", help="Records to send.")] = 1_000_000,
    record_size: Annotated[int, typer.Option("--record-size", "-s", help="Value size in bytes.")] = 100,
    throughput: Annotated[int, typer.Option("--throughput", help="Max records/s (-1: unthrottled).")] = -1,
    prop: Props = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Producer performance test: records/s, MB/s, latency percentiles."""
    from odradek.client import KafkaError, Producer

    config = {**load_command_config(command_config, "producer"), "bootstrap.servers": bootstrap_server,
              "client.id": "odradek-perf", **parse_props(prop)}
    value = os.urandom(record_size)
    sample_every = max(1, num_records // 100_000)
    latencies: list[float] = []
    errors: list[BaseException] = []

    def make_callback(start: float) -> Any:
        def cb(_md: Any, exc: BaseException | None) -> None:
            if exc is not None:
                errors.append(exc)
            else:
                latencies.append((time.perf_counter() - start) * 1000)

        return cb

    try:
        producer = Producer(config)
    except KafkaError as exc:
        fail(str(exc))
    try:
        with _progress(num_records, quiet) as progress:
            task = progress.add_task("produce", total=num_records, rate="")
            start = time.perf_counter()
            send = producer.send
            step = max(1, num_records // 200)
            for i in range(num_records):
                if throughput > 0:
                    ahead = i / throughput - (time.perf_counter() - start)
                    if ahead > 0:
                        time.sleep(ahead)
                if i % sample_every == 0:
                    send(topic, value, on_delivery=make_callback(time.perf_counter()))
                else:
                    send(topic, value)
                if i % step == 0:
                    el = time.perf_counter() - start
                    progress.update(task, completed=i, rate=f"{i / el:,.0f} rec/s" if el > 0 else "")
            producer.flush()
            elapsed = time.perf_counter() - start
            progress.update(task, completed=num_records)
    except KafkaError as exc:
        fail(str(exc))
    finally:
        producer.close()
    lat = sorted(latencies)
    rate = num_records / elapsed
    typer.echo(
        f"{num_records} records sent, {rate:,.1f} records/sec ({rate * record_size / 1e6:.2f} MB/sec), "
        f"{sum(lat) / max(1, len(lat)):.2f} ms avg latency, {lat[-1] if lat else 0:.2f} ms max latency, "
        f"{percentile(lat, 50):.0f} ms 50th, {percentile(lat, 95):.0f} ms 95th, "
        f"{percentile(lat, 99):.0f} ms 99th, {percentile(lat, 99.9):.0f} ms 99.9th."
    )
    if errors:
        fail(f"{len(errors)} sampled records failed: {errors[0]}")


@app.command()
def consume(
    topic: Annotated[str, typer.Option("--topic", "-t", help="Topic to consume.")],
    messages: Annotated[int, typer.Option("--messages", "-m", help="Records to consume.")] = 1_000_000,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group (default: assign all partitions).")] = None,
    timeout_ms: Annotated[int, typer.Option("--timeout", help="Give up after this long without records.")] = 10_000,
    prop: Props = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Consumer performance test from the beginning of the topic: records/s, MB/s."""
    from odradek.client import Consumer, KafkaError, TopicPartition

    config = {
        **load_command_config(command_config, "consumer"),
        "bootstrap.servers": bootstrap_server,
        "client.id": "odradek-perf",
        "auto.offset.reset": "earliest",
        "max.poll.records": 10000,
        **({"group.id": group} if group else {"enable.auto.commit": "false"}),
        **parse_props(prop),
    }
    count = 0
    nbytes = 0
    try:
        consumer = Consumer(config)
    except KafkaError as exc:
        fail(str(exc))
    try:
        if group:
            consumer.subscribe([topic])
        else:
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
        with _progress(messages, quiet) as progress:
            task = progress.add_task("consume", total=messages, rate="")
            start = last = time.perf_counter()
            first = None
            while count < messages:
                records = consumer.poll(0.5, max_records=messages - count)
                now = time.perf_counter()
                if not records:
                    if now - last > timeout_ms / 1000:
                        break
                    continue
                if first is None:
                    first = now
                last = now
                count += len(records)
                nbytes += sum(len(r.value or b"") + len(r.key or b"") for r in records)
                progress.update(task, completed=count, rate=f"{count / (now - start):,.0f} rec/s")
            elapsed = last - start
    except KafkaError as exc:
        fail(str(exc))
    finally:
        consumer.close(autocommit=False)
    rate = count / elapsed if elapsed > 0 else 0.0
    typer.echo(
        f"{count} records consumed in {elapsed:.3f} s, {rate:,.1f} records/sec, "
        f"{nbytes / 1e6 / elapsed if elapsed > 0 else 0:.2f} MB/sec"
    )
    if count < messages:
        fail(f"only {count} of {messages} records arrived within the timeout")

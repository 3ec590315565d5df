"""What security costs: TLS and SASL against PLAINTEXT on one broker, the authorizer with
10,000 ACLs, and SCRAM logins.

    PYTHONPATH=src .venv/bin/python bench/security.py [--records 200000] [--runs 3]
        [--logins 300] [--login-threads 2] [--json out.json]

One broker process (``odradek broker``, uvloop) with three listeners on 127.0.0.1: PLAINTEXT,
SSL and SASL_SSL (SCRAM-SHA-512, a credential of 4096 iterations), certificates from
``odradek.security.certificates``.

1. **Throughput.** Per run, for each protocol (the order rotates from run to run): a
   confluent-kafka producer sends ``--records`` records of 100 B to a new one-partition topic
   (acks=all, linger.ms=5), then a consumer reads them all back from offset 0. Wall time and
   the broker's CPU (user + system, /proc) of each phase; records/s, MB/s and broker CPU seconds
   per million records; medians over the runs and ratios to PLAINTEXT.
2. **Authorizer.** ``bench/authorizer.py``'s 10,000 ACLs, called in-process: one decision
   (WRITE on a topic) uncached (the decision cache cleared before each) and cached; median
   and p99 over 20,000 decisions.
3. **SCRAM logins.** ``--login-threads`` threads each open connections to the SASL_SSL
   listener one after another, up to ``--logins`` in all (and at most 60 s): TCP connect, TLS
   handshake, SaslHandshake v1, the two SaslAuthenticate v1 round trips of SCRAM-SHA-512 (the
   client derives the salted password each time, as librdkafka does), close. Median and p99
   of the TLS handshake and of the SCRAM exchange, connections per second, and the broker's
   CPU per connection (its capacity: 1 / that, per core).

Every loop is bounded in count and time. The clients run on the same machine as the broker.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from common import cpu_seconds, free_port, median, percentile, print_table

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-pw"
RECORD = b"x" * 100


def start_broker(tmp: Path) -> tuple[Any, dict[str, int], Path]:
    from odradek.security.certificates import CertificateAuthority
    from odradek.testing.process import BrokerProcess

    ca = CertificateAuthority("odradek bench CA")
    keystore, ca_pem = tmp / "broker.pem", tmp / "ca.pem"
    keystore.write_bytes(ca.issue("broker").keystore_pem)
    ca_pem.write_bytes(ca.certificate_pem)
    ports = {p: free_port() for p in PROTOCOLS}
    broker = BrokerProcess(
        {
            "listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items()),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca_pem),
            "log.dirs": str(tmp / "data"),
        },
        start_timeout=60,
    )
    broker.start()
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    return broker, ports, ca_pem


def client_conf(protocol: str, ports: dict[str, int], ca_pem: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{ports[protocol]}"}
    if protocol != "PLAINTEXT":
        conf.update({"security.protocol": protocol, "ssl.ca.location": str(ca_pem)})
    if protocol.startswith("SASL"):
        conf.update(
            {"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD}
        )
    return conf


def produce_consume(conf: dict[str, Any], records: int, pid: int) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    producer.list_topics(topic, timeout=10)  # connected and authenticated before the clock
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    deadline = time.monotonic() + 120
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, RECORD)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("produce") from None
    if producer.flush(120) != 0:
        raise TimeoutError("flush")
    produce_s, produce_cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0

    consumer = Consumer(
        {**conf, "group.id": topic, "enable.auto.commit": False, "fetch.wait.max.ms": 10}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error() is None:
                got += 1
    consume_s, consume_cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    consumer.close()
    if got < records:
        raise TimeoutError(f"consumed {got} of {records}")
    return {
        "produce_rps": records / produce_s,
        "produce_cpu_per_m": produce_cpu / records * 1e6,
        "consume_rps": records / consume_s,
        "consume_cpu_per_m": consume_cpu / records * 1e6,
    }


def authorizer_cost(acls: int = 10_000, requests: int = 20_000) -> dict[str, float]:
    import random

    from authorizer import build
    from odradek.security.acls import AclOperation, ResourceType
    from odradek.security.principal import KafkaPrincipal

    authz = build(acls)
    rnd = random.Random(1)
    queries = []
    for _ in range(requests):
        i = rnd.randrange(acls // 2)
        who = KafkaPrincipal("User", f"user-{i % 500 if rnd.random() < 0.9 else 9999}")
        queries.append((who, "10.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, f"topic-{i}"))
    out: dict[str, float] = {"acls": float(len(authz))}
    for label in ("uncached", "cached"):
        times = []
        for q in queries:
            if label == "uncached":
                authz._cache.clear()
            t0 = time.perf_counter_ns()
            authz.authorize(*q)
            times.append((time.perf_counter_ns() - t0) / 1000)
        out[f"{label}_median_us"] = statistics.median(times)
        out[f"{label}_p99_us"] = percentile(times, 99)
    return out


def _frame(api_key: int, version: int, body: bytes, correlation: int) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation, 5) + b"bench"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _read_answer(s: ssl.SSLSocket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    size = struct.unpack(">i", exactly(4))[0]
    return exactly(size)[4:]  # past the correlation id


def one_login(port: int, context: ssl.SSLContext) -> tuple[float, float]:
    """(TLS handshake seconds, SCRAM exchange seconds) of one new connection."""
    from odradek.security import sasl_client as sc

    t0 = time.perf_counter()
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        t1 = time.perf_counter()
        s.sendall(_frame(17, 1, sc.handshake_body("SCRAM-SHA-512"), 1))
        error, _ = sc.decode_handshake(_read_answer(s))
        if error:
            raise ConnectionError(f"SaslHandshake error {error}")
        client = sc.SaslClient("SCRAM-SHA-512", USER, PASSWORD)
        token = client.first()
        for correlation in (2, 3):
            s.sendall(_frame(36, 1, sc.authenticate_body(token), correlation))
            answer = sc.decode_authenticate(_read_answer(s))
            if answer.error_code:
                raise ConnectionError(f"SaslAuthenticate error {answer.error_code}")
            if correlation == 2:
                token = client.respond(answer.auth_bytes)
            else:
                client.check_final(answer.auth_bytes)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def scram_logins(
    port: int, ca_pem: Path, pid: int, total: int, threads: int, limit_s: float = 60.0
) -> dict[str, float]:
    context = ssl.create_default_context(cafile=str(ca_pem))
    one_login(port, context)  # warm-up
    tls: list[float] = []
    scram: list[float] = []
    lock = threading.Lock()
    left = [total]
    deadline = time.monotonic() + limit_s

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            a, b = one_login(port, context)
            with lock:
                tls.append(a)
                scram.append(b)

    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    n = len(tls)
    return {
        "connections": float(n),
        "threads": float(threads),
        "tls_median_ms": statistics.median(tls) * 1000,
        "tls_p99_ms": percentile(tls, 99) * 1000,
        "scram_median_ms": statistics.median(scram) * 1000,
        "scram_p99_ms": percentile(scram, 99) * 1000,
        "connections_per_s": n / elapsed,
        "broker_cpu_ms_per_connection": cpu / n * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--logins", type=int, default=300)
    ap.add_argument("--login-threads", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    results: dict[str, Any] = {"records": args.records, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="odradek-bench-security-") as tmp:
        broker, ports, ca_pem = start_broker(Path(tmp))
        try:
            pid = broker.pid
            assert pid is not None
            per: dict[str, list[dict[str, float]]] = {p: [] for p in PROTOCOLS}
            for run in range(args.runs):
                order = PROTOCOLS[run % 3 :] + PROTOCOLS[: run % 3]
                for protocol in order:
                    r = produce_consume(client_conf(protocol, ports, ca_pem), args.records, pid)
                    per[protocol].append(r)
                    print(f"run {run + 1} {protocol}: {r}", file=sys.stderr, flush=True)
            throughput = {p: {k: median(r[k] for r in rs) for k in rs[0]} for p, rs in per.items()}
            results["throughput"] = throughput
            results["throughput_runs"] = per
            results["logins"] = scram_logins(
                ports["SASL_SSL"], ca_pem, pid, args.logins, args.login_threads
            )
        finally:
            broker.stop()
    results["authorizer"] = authorizer_cost()

    base = results["throughput"]["PLAINTEXT"]
    rows = []
    for p in PROTOCOLS:
        t = results["throughput"][p]
        rows.append(
            [
                p,
                f"{t['produce_rps'] / 1000:.0f}k ({t['produce_rps'] / base['produce_rps']:.2f})",
                f"{t['produce_cpu_per_m']:.2f} ({t['produce_cpu_per_m'] / base['produce_cpu_per_m']:.2f})",
                f"{t['consume_rps'] / 1000:.0f}k ({t['consume_rps'] / base['consume_rps']:.2f})",
                f"{t['consume_cpu_per_m']:.2f} ({t['consume_cpu_per_m'] / base['consume_cpu_per_m']:.2f})",
            ]
        )
    print_table(
        [
            "listener",
            "produce rec/s (ratio to PLAINTEXT)",
            "broker CPU s / M produced",
            "consume rec/s",
            "broker CPU s / M consumed",
        ],
        rows,
    )
    a = results["authorizer"]
    print(
        f"authorizer, {a['acls']:.0f} ACLs: uncached median {a['uncached_median_us']:.2f} us "
        f"p99 {a['uncached_p99_us']:.2f} us; cached median {a['cached_median_us']:.2f} us "
        f"p99 {a['cached_p99_us']:.2f} us"
    )
    lg = results["logins"]
    print(
        f"SASL_SSL logins ({lg['connections']:.0f}, {lg['threads']:.0f} threads): TLS handshake "
        f"median {lg['tls_median_ms']:.1f} ms p99 {lg['tls_p99_ms']:.1f} ms; SCRAM exchange "
        f"median {lg['scram_median_ms']:.1f} ms p99 {lg['scram_p99_ms']:.1f} ms; "
        f"{lg['connections_per_s']:.0f} connections/s; broker CPU "
        f"{lg['broker_cpu_ms_per_connection']:.2f} ms per connection"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

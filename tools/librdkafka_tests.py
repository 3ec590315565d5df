#!/usr/bin/env python3
"""Run librdkafka's own test suite against odradek and print a pass/fail table.

    .venv/bin/python tools/librdkafka_tests.py                      # every applicable test
    .venv/bin/python tools/librdkafka_tests.py --tests 0102,0113 \\
        --set group.initial.rebalance.delay.ms=0                    # some, with a broker setting
    .venv/bin/python tools/librdkafka_tests.py --list               # the selection and exclusions
    .venv/bin/python tools/librdkafka_tests.py --brokers 3 --tests 0101,0103,0107,0111
    .venv/bin/python tools/librdkafka_tests.py --security           # TLS, SASL and ACL tests

What it does, in a scratch folder (``--workdir``, default ``/tmp/odradek-librdkafka-<tag>``;
nothing of it is ever committed):

1. Source: ``git archive <tag>`` of a librdkafka git directory (``--git-dir``, or
   ``$ODRADEK_LIBRDKAFKA_GIT_DIR``; otherwise a bare clone of
   https://github.com/confluentinc/librdkafka made in the workdir).
2. Build: ``./configure --enable-ssl --enable-gssapi --disable-curl`` (``CONFIGURE``), ``make
   libs`` and ``make -C tests test-runner``. Debian build dependencies: ``build-essential``
   (gcc, g++, make), ``pkg-config``, ``python3``, ``zlib1g-dev``, ``libssl-dev``,
   ``libsasl2-dev``, ``libzstd-dev`` (optional;
   lz4 and snappy are bundled), ``rapidjson-dev`` (optional: without it 0053_stats,
   0098_consumer_txn and 0110_batch_size skip themselves, "RapidJSON >=1.1.0 not available"). They are *not* part of ``make test``.
3. For every test (grouped by test number and librdkafka test scenario) a fresh odradek
   broker (``odradek.testing.BrokerProcess``: 127.0.0.1, an ephemeral port, a temporary
   data dir) and ``test-runner -L -K -p1 [-s <scenario>]`` with ``TESTS=<number>``,
   ``TEST_KAFKA_VERSION=3.9.0`` and ``test.conf`` pointing at the broker; each run is bounded
   by ``--timeout`` seconds (the whole process group is killed after that).
4. A table: test, PASSED/FAILED/SKIPPED/TIMEOUT, seconds, reason (librdkafka's own failure
   string). ``--json`` writes the same as JSON. Outputs of each run (test-runner and broker
   log) stay in ``<workdir>/logs``.

The selection: every test of librdkafka's table (tests/test.c) that needs a broker and applies
to one plaintext Kafka 3.9 broker. The broker gets the settings of the test's librdkafka
scenario (tests/scenarios/*.json: ``num.partitions=4``; ``auto.create.topics.enable=false``
for the ``noautocreate`` tests), the authorizer trivup gives Kafka (``AUTHORIZER``), then the
``--set`` ones. Tests that drive Kafka's own command-line tools get
``KAFKA_PATH`` pointing at a shim whose ``kafka-topics.sh`` does the same through the admin
API (``confluent_kafka``) and whose ``kafka-acls.sh`` runs ``odradek acls``. ``EXCLUDED`` lists
what is left out and why.

``--brokers 3``: each run gets a ZooKeeper server and three brokers on it instead of one
broker (replication factors up to 3, ``transaction.state.log.min.isr`` 2, ``broker.rack``
RACK<id> and the rack-aware replica selector, as librdkafka's cluster_testing.py sets up Kafka):
for the tests that create topics with replication factor 3, such as 0103_transactions, and
``THREE_BROKERS`` (0101 fetch-from-follower, 0107, 0111).

``--security``: the runs of ``SECURITY`` instead (``--tests`` picks runs by name prefix): TLS,
SASL and ACL tests and librdkafka's sasl_test.py suites, each against a broker (or three)
configured as trivup's KafkaBrokerApp configures Kafka for them (``SecurityRun``), with PEM
certificates generated in ``<workdir>/ssl``.

Modes: librdkafka's full mode (``--quick`` adds ``-Q``, which skips most subtests, 0102's
static-membership test and 0113 after its first subtests among them) and
``test.timeout.multiplier`` 2 (``--timeout-multiplier``: a loaded shared machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.testing.process import BrokerProcess

DEFAULT_TAG = "v2.15.0"
GIT_DIR_ENV = "ODRADEK_LIBRDKAFKA_GIT_DIR"
UPSTREAM = "https://github.com/confluentinc/librdkafka"
KAFKA_VERSION = "3.9.0"

# (entry name, scenario). Entry names as in librdkafka's tests/test.c (v2.15).


def _names(text: str) -> list[str]:
    return text.split()


APPLICABLE: list[tuple[str, str]] = [
    (name, "default")
    for name in _names("""
    0001_multiobj 0002_unkpart 0003_msgmaxsize 0005_order 0007_autotopic 0008_reqacks
    0011_produce_batch 0012_produce_consume 0013_null_msgs 0014_reconsume_191
    0015_offsets_seek 0016_client_swname 0017_compression 0018_cgrp_term 0019_list_groups
    0020_destroy_hang 0021_rkt_destroy 0022_consume_batch 0026_consume_pause
    0029_assign_offset 0030_offset_commit 0031_get_offsets 0033_regex_subscribe
    0034_offset_reset 0035_api_version 0036_partial_fetch 0038_performance 0039_event_dr
    0040_io_event 0041_fetch_max_bytes 0042_many_topics 0044_partition_cnt
    0045_subscribe_update 0045_resubscribe_with_regex 0045_subscribe_many_updates
    0048_partitioner 0049_consume_conn_close 0050_subscribe_adds 0051_assign_adds
    0052_msg_timestamps 0053_stats 0054_offset_time 0055_producer_latency
    0056_balanced_group_mt 0057_invalid_topic 0059_bsearch 0060_op_prio 0061_consumer_lag
    0063_clusterid 0064_interceptors 0065_yield 0067_empty_topic 0068_produce_timeout
    0069_consumer_add_parts 0070_null_empty 0073_headers 0075_retry 0076_produce_retry
    0077_compaction 0081_admin 0082_fetch_max_bytes 0083_cb_event 0084_destroy_flags
    0085_headers 0086_purge_remote 0088_produce_metadata_timeout 0089_max_poll_interval
    0090_idempotence 0091_max_poll_interval_timeout 0092_mixed_msgver 0093_holb_consumer
    0094_idempotence_msg_timeout 0099_commit_metadata
    0102_static_group_rebalance 0103_transactions 0109_auto_create_topics 0110_batch_size
    0112_assign_unknown_part 0113_cooperative_rebalance 0114_sticky_partitioning
    0118_commit_rebalance 0122_buffer_cleaning_after_rebalance 0123_connections_max_idle
    0125_immediate_flush 0127_fetch_queue_backoff 0129_fetch_aborted_msgs 0130_store_offsets
    0132_strategy_ordering 0137_barrier_batch_consume 0140_commit_metadata
    """)
] + [
    (name, "noautocreate")
    for name in _names("""
    0045_subscribe_update_topic_remove 0045_subscribe_update_non_exist_and_partchange
    """)
]

# Tests that need three brokers (replication factor 3, racks): with --brokers 3 only.
THREE_BROKERS: list[tuple[str, str]] = [
    ("0101_fetch_from_follower", "default"),
    ("0107_topic_recreate", "noautocreate"),
    ("0111_delay_create_topics", "noautocreate"),
]

# Tests of librdkafka's table that need a broker but are not run, and why. (Tests flagged
# TEST_F_LOCAL or TEST_F_MANUAL need no broker and are never run here.)
EXCLUDED: dict[str, str] = {
    "0028_long_topicnames": "librdkafka marks it TEST_F_KNOWN_ISSUE (its issue 529)",
    "0047_partial_buf_tmout": "librdkafka marks it TEST_F_KNOWN_ISSUE",
    "0097_ssl_verify": "TLS listeners: --security",
    "0101_fetch_from_follower": "three brokers with racks: --brokers 3",
    "0107_topic_recreate": "replication factor 3: --brokers 3",
    "0111_delay_create_topics": "replication factor 3: --brokers 3",
    "0115_producer_auth": "an authorizer and kafka-acls.sh: --security",
    "0119_consumer_auth": "an authorizer and kafka-acls.sh: --security",
    "0098_consumer_txn": "produces with Kafka's Java client (its tests/java TransactionProducerCli)",
    "0126_oauthbearer_oidc": "needs SASL/OAUTHBEARER and an OIDC server",
    "0135_sasl_credentials": "SASL listeners: --security",
    "0139_offset_validation_mock": "runs against librdkafka's mock cluster only",
    "0142_reauthentication": "SASL listeners: --security",
    "0150_telemetry_mock": "runs against librdkafka's mock cluster only",
    "0170..0185_share_consumer_*": "share groups (KIP-932) need Kafka 4.2",
}

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY = re.compile(
    r"^\|\s*(?P<name>\d{4}_\S+)\s*\|\s*(?P<state>PASSED|FAILED|SKIPPED|RUNNING|NOT STARTED)\s*"
    r"\|\s*(?P<secs>[\d.]+)s\s*\|\s?(?P<reason>.*)$"
)
FAILED_AT = re.compile(r'^### Test "(?P<name>[^"]+)" failed at (?P<where>[^#]*)###$')


@dataclass
class Result:
    test: str
    scenario: str
    result: str
    seconds: float
    reason: str


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(cmd: list[str], cwd: Path, logfile: Path) -> None:
    log(f"$ {shlex.join(cmd)}  (in {cwd}, output in {logfile})")
    with logfile.open("ab") as out:
        subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=True)


# -- source and build ----------------------------------------------------------------------


def prepare_source(tag: str, git_dir: Path | None, workdir: Path) -> Path:
    src = workdir / "src"
    marker = src / ".odradek-tag"
    if marker.exists() and marker.read_text().strip() == tag:
        return src
    workdir.mkdir(parents=True, exist_ok=True)
    if git_dir is None:
        env = os.environ.get(GIT_DIR_ENV)
        git_dir = Path(env) if env else workdir / "librdkafka.git"
        if not git_dir.exists():
            run(["git", "clone", "--bare", UPSTREAM, str(git_dir)], workdir, workdir / "git.log")
    src.mkdir(parents=True, exist_ok=True)
    log(f"extracting {tag} from {git_dir} into {src}")
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", tag], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    marker.write_text(tag + "\n")
    return src


CONFIGURE = ["./configure", "--enable-ssl", "--enable-gssapi", "--disable-curl"]


def build(src: Path, jobs: int) -> Path:
    """``tests/test-runner`` built with ``CONFIGURE`` (OpenSSL and Cyrus SASL: the security
    tests need both); a test-runner built with other flags (``.odradek-configure`` records
    them) is built again."""
    runner = src / "tests" / "test-runner"
    marker = src / ".odradek-configure"
    flags = " ".join(CONFIGURE) + "\n"
    if runner.exists() and marker.exists() and marker.read_text() == flags:
        return runner
    logfile = src / "build.log"
    run(CONFIGURE, src, logfile)
    run(["make", f"-j{jobs}", "libs"], src, logfile)
    run(["make", f"-j{jobs}", "-C", "tests", "test-runner"], src, logfile)
    marker.write_text(flags)
    return runner


# -- KAFKA_PATH shim -------------------------------------------------------------------------

SHIM = """#!/bin/sh
# {tool}.sh for librdkafka's tests, through odradek (tools/librdkafka_tests.py)
exec {python} {script} {tool} "$@"
"""


def write_shim(workdir: Path) -> Path:
    kafka_path = workdir / "kafka-shim"
    (kafka_path / "bin").mkdir(parents=True, exist_ok=True)
    for tool in ("kafka-topics", "kafka-acls"):
        script = kafka_path / "bin" / f"{tool}.sh"
        script.write_text(
            SHIM.format(
                tool=tool,
                python=shlex.quote(sys.executable),
                script=shlex.quote(str(Path(__file__).resolve())),
            )
        )
        script.chmod(0o755)
    return kafka_path


def kafka_topics(argv: list[str]) -> int:
    """The subset of kafka-topics.sh librdkafka's tests use: --create (partitions, replication
    factor, --config k=v), --alter --partitions, --delete; --bootstrap-server."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    p = argparse.ArgumentParser(prog="kafka-topics.sh")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--create", action="store_true")
    p.add_argument("--alter", action="store_true")
    p.add_argument("--delete", action="store_true")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--config", action="append", default=[])
    a = p.parse_args(argv)
    admin = AdminClient({"bootstrap.servers": a.bootstrap_server})
    if a.create:
        configs = dict(c.split("=", 1) for c in a.config)
        topic = NewTopic(a.topic, a.partitions or 1, a.replication_factor, config=configs)
        futures = admin.create_topics([topic], operation_timeout=30)
    elif a.alter:
        futures = admin.create_partitions([NewPartitions(a.topic, a.partitions)])
    elif a.delete:
        futures = admin.delete_topics([a.topic], operation_timeout=30)
    else:
        p.error("one of --create, --alter, --delete")
    for fut in futures.values():
        fut.result(timeout=60)
    return 0


def kafka_acls(argv: list[str]) -> int:
    """kafka-acls.sh as librdkafka's tests call it (``--add``, ``--remove --force``, ``--list``
    with ``--bootstrap-server``, principals, hosts, operations, ``--topic``/``--group``):
    ``odradek acls add|remove|list`` takes the same options."""
    modes = {"--add": "add", "--remove": "remove", "--list": "list"}
    mode = [modes[a] for a in argv if a in modes]
    if len(mode) != 1:
        print("kafka-acls.sh: one of --add, --remove, --list", file=sys.stderr)
        return 2
    rest = [a for a in argv if a not in modes and a != "--force"]
    return subprocess.run([sys.executable, "-m", "odradek", "acls", mode[0], *rest]).returncode


# -- running ---------------------------------------------------------------------------------


def scenario_settings(src: Path, scenario: str) -> dict[str, str]:
    """The broker settings of librdkafka's test scenario (tests/scenarios/<name>.json, the
    trivup cluster configuration): ``auto_create_topics`` and ``num_partitions`` (4: tests
    produce to partitions of auto-created topics). Its ``replication_factor`` (3) needs three
    brokers and is left out."""
    text = (src / "tests" / "scenarios" / f"{scenario}.json").read_text()
    conf = json.loads(re.sub(r",\s*}", "}", text))  # the files have trailing commas
    return {
        "auto.create.topics.enable": str(conf.get("auto_create_topics", "true")).lower(),
        "num.partitions": str(conf.get("num_partitions", 1)),
    }


# trivup's KafkaBrokerApp gives every ZooKeeper-mode Kafka broker of librdkafka's tests an
# authorizer (SimpleAclAuthorizer, today's AclAuthorizer); everyone is allowed where no ACL
# says otherwise, which 0081's ACL subtests, 0109, 0115 and 0119 rely on
AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


def groups(selection: list[tuple[str, str]]) -> list[tuple[str, str, list[str]]]:
    """(test number, scenario, entry names): one test-runner invocation each."""
    out: dict[tuple[str, str], list[str]] = {}
    for name, scenario in selection:
        out.setdefault((name[:4], scenario), []).append(name)
    return [(num, sc, names) for (num, sc), names in out.items()]


def run_one(
    src: Path,
    kafka_path: Path,
    logs: Path,
    num: str,
    scenario: str,
    names: list[str],
    args: argparse.Namespace,
) -> list[Result]:
    settings = scenario_settings(src, scenario)
    settings.update(AUTHORIZER)
    settings.update(kv.split("=", 1) for kv in args.set)
    tag = f"{num}-{scenario}"
    out_path = logs / f"{tag}.out"
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        bootstrap = start_brokers(stack, settings, args, logs / tag)
        conf = logs / f"{tag}.conf"
        conf.write_text(
            f"bootstrap.servers={bootstrap}\n"
            f"test.timeout.multiplier={args.timeout_multiplier}\n"
            + (f"debug={args.debug}\n" if args.debug else "")
        )
        env = dict(os.environ)
        env.update(
            TESTS=num,
            TEST_KAFKA_VERSION=KAFKA_VERSION,
            RDKAFKA_TEST_CONF=str(conf),
            KAFKA_PATH=str(kafka_path),
            BROKERS=bootstrap,
            LD_LIBRARY_PATH=f"{src / 'src'}:{src / 'src-cpp'}",
        )
        if args.subtests:
            env["SUBTESTS"] = args.subtests
        cmd = ["./test-runner", "-L", "-K", "-p1"]
        if args.quick:
            cmd.append("-Q")
        if scenario != "default":
            cmd += ["-s", scenario]
        log(f"[{time.strftime('%H:%M:%S')}] {tag}: {' '.join(names)}")
        timed_out = run_test_runner(cmd, src / "tests", env, out_path, args.timeout)
    elapsed = time.monotonic() - t0
    return parse(out_path.read_text(errors="replace"), names, scenario, timed_out, elapsed, args)


def run_test_runner(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    out_path: Path,
    timeout: float,
    cpus: set[int] | None = None,
) -> bool:
    """Run test-runner (on ``cpus`` when given), output to ``out_path``; True when it was
    killed after ``timeout`` s."""
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )
        try:
            proc.wait(timeout=timeout)
            return False
        except subprocess.TimeoutExpired:
            return True
        finally:  # also when this script is interrupted: never leave test-runner behind
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def start_brokers(
    stack: contextlib.ExitStack, settings: dict[str, str], args: argparse.Namespace, tag: Path
) -> str:
    """One broker (the default), or with ``--brokers N`` a cluster: a ZooKeeper server and N
    brokers on it (broker.id 1..N, replication factors up to 3), each closed by ``stack``
    with its log written next to ``tag``. The bootstrap servers."""
    from odradek.testing.process import BrokerProcess

    n = args.brokers
    if n > 1:
        import tempfile

        from odradek.cluster.zookeeper import ZooKeeperServer

        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rdk-cluster-")))
        zookeeper = ZooKeeperServer(scratch / "zookeeper")
        zookeeper.start()
        stack.callback(zookeeper.stop)
        rf = str(min(3, n))
        base = {
            "zookeeper.connect": zookeeper.connect_string,
            "default.replication.factor": rf,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, n)),
            **settings,
        }
        rack = {"replica.selector.class": RACK_AWARE_SELECTOR}
        brokers = [
            BrokerProcess(
                {**base, **rack, "broker.id": str(i), "broker.rack": f"RACK{i}"},
                log_level=args.broker_log_level,
                data_dir=scratch / f"broker-{i}",
                start_timeout=60,
            )
            for i in range(1, n + 1)
        ]
    else:
        brokers = [BrokerProcess(settings, log_level=args.broker_log_level)]
    for i, broker in enumerate(brokers, 1):
        stack.callback(_close_broker, broker, tag.with_name(f"{tag.name}.broker-{i}.log"))
        broker.start()
    return ",".join(b.bootstrap_servers for b in brokers)


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _close_broker(broker: BrokerProcess, log_path: Path) -> None:
    broker_log = broker.stderr_tail(200_000) if broker.pid is not None else ""
    broker.close()
    log_path.write_text(broker_log)


def parse(
    text: str,
    names: list[str],
    scenario: str,
    timed_out: bool,
    elapsed: float,
    args: argparse.Namespace,
) -> list[Result]:
    lines = [ANSI.sub("", line).rstrip() for line in text.splitlines()]
    summary: dict[str, tuple[str, float, str]] = {}
    first_failure: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = SUMMARY.match(line)
        if m:
            summary[m["name"]] = (m["state"], float(m["secs"]), m["reason"].strip())
            continue
        f = FAILED_AT.match(line)
        if f and i + 1 < len(lines):
            entry = f["name"].split(" (")[0]
            first_failure.setdefault(entry, f"{f['name']}: {lines[i + 1].strip()}")
    results = []
    for name in names:
        state, secs, reason = summary.get(name, ("", elapsed, ""))
        if timed_out and state != "PASSED":
            state = "TIMEOUT"
            reason = f"killed after {args.timeout} s; " + first_failure.get(name, "")
        elif not state:
            state = "FAILED"
            reason = first_failure.get(name, "no result in test-runner's summary")
        elif state == "FAILED" and name in first_failure:
            reason = first_failure[name]
        results.append(Result(name, scenario, state, secs, reason))
    return results


# -- security runs (--security) --------------------------------------------------------------

SASL_USER, SASL_PASSWORD = "myuser", "mypassword"  # sasl_test.py's sasl_users
SSL_PASSWORD = "12345678"  # trivup's ssl_key_pass
# the tests sasl_test.py runs whole ("all tests") in its SCRAM, SSL and SASL_SSL PLAIN suites:
# here a produce/consume/commit subset of them
SUITE_TESTS = "0001,0012,0030"


@dataclass(frozen=True)
class SecurityRun:
    """One test-runner invocation of the ``--security`` selection.

    ``tests``: librdkafka test numbers (``TESTS``), ``subtests`` its ``SUBTESTS`` filter. The
    client connects on ``protocol`` with SASL ``mechanism`` (empty: none) as ``user``; the
    broker (set up as trivup's KafkaBrokerApp sets up Kafka for librdkafka's tests: PLAINTEXT,
    plus SSL when the client uses TLS, plus SASL_PLAINTEXT and SASL_SSL when it uses SASL, an
    authorizer with ``allow.everyone.if.no.acl.found=true``, ``ssl.client.auth=required``)
    gets ``broker`` on top; ``brokers`` > 1: that many on a ZooKeeper server, as librdkafka's CI
    runs them (tests creating topics with replication factor 3). ``client``: test.conf lines
    replacing the defaults.
    ``expect_fail``: sasl_test.py's suites that pass when every test fails. ``local``: a test
    flagged TEST_F_LOCAL (run without ``-L``)."""

    name: str
    tests: str
    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    client: tuple[tuple[str, str], ...] = ()
    broker: tuple[tuple[str, str], ...] = ()
    subtests: str | None = None
    expect_fail: bool = False
    local: bool = False
    brokers: int = 1
    apart: bool = False


def cpu_split() -> tuple[set[int], set[int]] | None:
    """(the brokers' CPUs, test-runner's CPU) for a run with ``SecurityRun.apart``: all but
    the last CPU this process may use, and the last; None with fewer than two."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    return set(cpus[:-1]), {cpus[-1]}


REAUTH = (("connections.max.reauth.ms", "10000"),)
SECURITY: list[SecurityRun] = [
    # ACLs through kafka-acls.sh, PLAINTEXT clients (User:ANONYMOUS)
    SecurityRun("0081_admin[Acls]", "0081", subtests="Acls"),
    SecurityRun("0109_auto_create_topics", "0109"),
    SecurityRun("0115_producer_auth", "0115"),
    SecurityRun("0119_consumer_auth", "0119"),
    # TLS. 0097 expects _SSL (or _ALL_BROKERS_DOWN) on each connection whose broker
    # certificate the client rejects. librdkafka reports _TRANSPORT instead when its very first
    # SSL_connect() call, right after the TCP connect, already fails: that happens when the
    # broker's whole first flight (ServerHello .. Finished) is in the socket before the client
    # reads, i.e. when the broker, woken by the ClientHello on the client's CPU, preempts the
    # client and answers within the wakeup granularity. A C/OpenSSL server answers in about
    # 1.3 ms (odradek 1.5 ms, `openssl s_server` 1.3 ms, Java's JSSE, Kafka's TLS stack, 7.6 ms
    # median) and so wins that race for about one connection in four when client and broker
    # share a CPU (odradek and `openssl s_server` alike), never when they do not and never over
    # a real network. ``apart``: the brokers and test-runner run on different CPUs.
    SecurityRun("0097_ssl_verify[SSL]", "0097", "SSL", apart=True),
    SecurityRun("0097_ssl_verify[SASL_SSL]", "0097", "SASL_SSL", "PLAIN", apart=True),
    SecurityRun("0133_ssl_keys", "0133", local=True),
    # SASL
    # (0135 and 0142 also have share-consumer subtests: share groups, KIP-932, are Kafka 4's;
    # SUBTESTS leaves them out)
    SecurityRun(
        "0135_sasl_credentials[PLAIN]", "0135", "SASL_PLAINTEXT", "PLAIN", subtests="do_test:"
    ),
    SecurityRun(
        "0135_sasl_credentials[SCRAM]", "0135", "SASL_SSL", "SCRAM-SHA-512", subtests="do_test:"
    ),
    *(
        SecurityRun(
            f"0142_reauthentication[{sub}]",
            "0142",
            "SASL_PLAINTEXT",
            "SCRAM-SHA-512",
            broker=REAUTH,
            subtests=f"{sub}:",
            brokers=3,  # do_test_consumer creates its topic with replication factor 3
        )
        for sub in (
            "do_test_consumer",
            "do_test_producer",
            "do_test_txn_producer",
            "do_test_reauth_failure",
        )
    ),
    SecurityRun(
        "0142_reauthentication[do_test_oauthbearer]",
        "0142",
        "SASL_PLAINTEXT",
        "OAUTHBEARER",
        broker=REAUTH,
        subtests="do_test_oauthbearer:",
        brokers=3,
    ),
    # tests/sasl_test.py's suites that need no Kerberos and no OIDC server
    SecurityRun("sasl_test[SASL PLAIN]", "0001", "SASL_PLAINTEXT", "PLAIN"),
    SecurityRun("sasl_test[SASL SCRAM]", SUITE_TESTS, "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    SecurityRun("sasl_test[PLAINTEXT (no SASL)]", "0001"),
    SecurityRun("sasl_test[SSL (no SASL)]", SUITE_TESTS, "SSL"),
    SecurityRun("sasl_test[SASL_SSL PLAIN]", SUITE_TESTS, "SASL_SSL", "PLAIN"),
    SecurityRun(
        "sasl_test[SASL PLAIN with wrong username]",
        "0001",
        "SASL_PLAINTEXT",
        "PLAIN",
        client=(("sasl.username", "wrongjoe"),),
        expect_fail=True,
    ),
    SecurityRun("sasl_test[SASL OAUTHBEARER]", "0001", "SASL_PLAINTEXT", "OAUTHBEARER"),
    SecurityRun(
        "sasl_test[SASL OAUTHBEARER with wrong scope]",
        "0001",
        "SASL_PLAINTEXT",
        "OAUTHBEARER",
        client=(("sasl.oauthbearer.config", "scope=wrongScope"),),
        expect_fail=True,
    ),
    # the suite above fails in the client (its token names no principal): the same with a
    # principal, so that the broker's unsecuredValidatorRequiredScope refuses it
    SecurityRun(
        "sasl_test[SASL OAUTHBEARER with wrong scope and a principal]",
        "0001",
        "SASL_PLAINTEXT",
        "OAUTHBEARER",
        client=(("sasl.oauthbearer.config", "scope=wrongScope principal=admin"),),
        expect_fail=True,
    ),
]


@dataclass
class SslFiles:
    """trivup's SslApp files, made with ``cryptography``: a CA (``ca_pem``, ``ca_der``), the
    broker's PEM key store (key + certificate for 127.0.0.1 and localhost) and the client's
    key and certificate in PEM, DER and PKCS#12 (key, certificate and CA; ``SSL_PASSWORD``).
    ``env`` holds the ``SSL_*`` variables librdkafka's tests read (0097)."""

    ca_pem: Path
    broker_keystore: Path
    client_pub_pem: Path
    client_priv_pem: Path
    env: dict[str, str]


def make_ssl_files(folder: Path) -> SslFiles:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COUNTRY_NAME, "NN"),
                x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "ST"),
                x509.NameAttribute(NameOID.LOCALITY_NAME, "L"),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "O"),
                x509.NameAttribute(NameOID.COMMON_NAME, cn),
            ]
        )

    def cert(
        cn: str,
        key: rsa.RSAPrivateKey,
        issuer: tuple[x509.Name, rsa.RSAPrivateKey] | None,
        sans: list[x509.GeneralName] | None = None,
    ) -> x509.Certificate:
        subject = name(cn)
        issuer_name, issuer_key = issuer or (subject, key)
        b = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), True)
        )
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), False)
        return b.sign(issuer_key, hashes.SHA256())

    def new_key() -> rsa.RSAPrivateKey:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    pem, der = serialization.Encoding.PEM, serialization.Encoding.DER
    unencrypted = serialization.NoEncryption()
    ca_key = new_key()
    ca = cert("SslApp", ca_key, None)
    broker_key = new_key()
    broker = cert(
        "broker",
        broker_key,
        (ca.subject, ca_key),
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
    )
    client_key = new_key()
    client = cert("librdkafka", client_key, (ca.subject, ca_key))
    files = {
        "ca_pem": ca.public_bytes(pem),
        "ca_der": ca.public_bytes(der),
        "broker-keystore.pem": broker_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, unencrypted
        )
        + broker.public_bytes(pem)
        + ca.public_bytes(pem),
        "pub_pem": client.public_bytes(pem),
        "pub_der": client.public_bytes(der),
        "priv_pem": client_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, unencrypted),
        "priv_der": client_key.private_bytes(
            der, serialization.PrivateFormat.TraditionalOpenSSL, unencrypted
        ),
        "pkcs": pkcs12.serialize_key_and_certificates(
            b"librdkafka",
            client_key,
            client,
            [ca],
            serialization.BestAvailableEncryption(SSL_PASSWORD.encode()),
        ),
    }
    paths = {}
    for key, data in files.items():
        path = folder / key.replace("_", ".")
        path.write_bytes(data)
        paths[key] = path
    env = {f"SSL_{k}": str(v) for k, v in paths.items() if not k.startswith("broker")}
    env.update(
        SSL_all_cas_pem=str(paths["ca_pem"]), SSL_password=SSL_PASSWORD, SSL_client_auth="required"
    )
    return SslFiles(
        paths["ca_pem"], paths["broker-keystore.pem"], paths["pub_pem"], paths["priv_pem"], env
    )


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports the kernel just handed out (bound together, then released)."""
    import socket

    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'user_{SASL_USER}="{SASL_PASSWORD}";',
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="{SASL_USER}" password="{SASL_PASSWORD}";',
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginLifetimeSeconds="3600" unsecuredLoginStringClaim_sub="admin" '
    'unsecuredValidatorRequiredScope="requiredScope";',
}


def security_setup(
    run: SecurityRun, ssl_files: SslFiles
) -> tuple[dict[str, str], dict[str, str], dict[str, str], list[dict[str, str]]]:
    """(broker settings, the client's test.conf keys, environment, for each of the
    ``run.brokers`` brokers its listener addresses by security protocol) for ``run``: every
    broker's settings are the first plus its ``listeners`` and ``advertised.listeners`` (the
    client's ``bootstrap.servers`` has them all)."""
    protocols = ["PLAINTEXT"]
    tls = "SSL" in run.protocol
    if tls:
        protocols.append("SSL")
    if run.mechanism:
        protocols.append("SASL_PLAINTEXT")
        if tls:
            protocols.append("SASL_SSL")
    ports = free_ports(len(protocols) * run.brokers)
    addresses = [
        {
            p: f"127.0.0.1:{port}"
            for p, port in zip(protocols, ports[i * len(protocols) :], strict=False)
        }
        for i in range(run.brokers)
    ]
    broker = dict(AUTHORIZER)
    client = {
        "bootstrap.servers": ",".join(a[run.protocol] for a in addresses),
        "security.protocol": run.protocol,
        "broker.address.family": "v4",
    }
    env: dict[str, str] = {}
    if tls:
        broker.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(ssl_files.broker_keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(ssl_files.ca_pem),
                "ssl.client.auth": "required",
            }
        )
        client.update(
            {
                "ssl.ca.location": str(ssl_files.ca_pem),
                "ssl.certificate.location": str(ssl_files.client_pub_pem),
                "ssl.key.location": str(ssl_files.client_priv_pem),
                "ssl.key.password": SSL_PASSWORD,
            }
        )
        env.update(ssl_files.env)
    if run.mechanism:
        broker["sasl.enabled.mechanisms"] = run.mechanism
        for p in protocols:
            if p.startswith("SASL"):
                broker[f"listener.name.{p.lower()}.{run.mechanism.lower()}.sasl.jaas.config"] = (
                    JAAS[run.mechanism]
                )
        client["sasl.mechanisms"] = run.mechanism
        if run.mechanism == "OAUTHBEARER":
            broker["super.users"] = "User:admin"
            client["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
            client["sasl.oauthbearer.config"] = "scope=requiredScope principal=admin"
        else:
            client["sasl.username"] = SASL_USER
            client["sasl.password"] = SASL_PASSWORD
    broker.update(run.broker)
    client.update(run.client)
    return broker, client, env, addresses


def add_scram_user(bootstrap: str, mechanism: str) -> None:
    """The SASL user, as trivup adds it with kafka-configs.sh (4096 iterations)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(getattr(ScramMechanism, mechanism.replace("-", "_")), 4096)
    upsert = UserScramCredentialUpsertion(SASL_USER, info, SASL_PASSWORD.encode())
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(timeout=30)


def run_security(
    src: Path,
    kafka_path: Path,
    logs: Path,
    run: SecurityRun,
    ssl_files: SslFiles,
    args: argparse.Namespace,
) -> Result:
    from odradek.testing.process import BrokerProcess

    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", run.name).strip("_")
    out_path = logs / f"{tag}.out"
    settings = scenario_settings(src, "default")
    broker_settings, client, env_extra, addresses = security_setup(run, ssl_files)
    settings.update(broker_settings)
    settings.update(kv.split("=", 1) for kv in args.set)
    split = cpu_split() if run.apart else None
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        if split is not None:  # brokers (and their threads) inherit this thread's CPUs
            stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
            os.sched_setaffinity(0, split[0])
        if run.brokers > 1:
            import tempfile

            from odradek.cluster.zookeeper import ZooKeeperServer

            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rdk-sec-")))
            zookeeper = ZooKeeperServer(scratch / "zookeeper")
            zookeeper.start()
            stack.callback(zookeeper.stop)
            rf = str(min(3, run.brokers))
            settings = {
                "zookeeper.connect": zookeeper.connect_string,
                "default.replication.factor": rf,
                "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "transaction.state.log.min.isr": str(min(2, run.brokers)),
                **settings,
            }
        for i, addr in enumerate(addresses, 1):
            listeners = ",".join(f"{p}://{a}" for p, a in addr.items())
            own = {"listeners": listeners, "advertised.listeners": listeners}
            if run.brokers > 1:
                own["broker.id"] = str(i)
            broker = BrokerProcess(
                {**settings, **own},
                log_level=args.broker_log_level,
                data_dir=scratch / f"broker-{i}" if run.brokers > 1 else None,
                start_timeout=60,
            )
            stack.callback(_close_broker, broker, logs / f"{tag}.broker-{i}.log")
            if not run.local:
                broker.start()
        if not run.local and run.mechanism.startswith("SCRAM"):
            add_scram_user(addresses[0]["PLAINTEXT"], run.mechanism)
        conf = logs / f"{tag}.conf"
        conf.write_text(
            "".join(f"{k}={v}\n" for k, v in client.items())
            + f"test.timeout.multiplier={args.timeout_multiplier}\n"
            + (f"debug={args.debug}\n" if args.debug else "")
        )
        env = dict(os.environ)
        env.update(
            TESTS=run.tests,
            TEST_KAFKA_VERSION=KAFKA_VERSION,
            RDKAFKA_TEST_CONF=str(conf),
            KAFKA_PATH=str(kafka_path),
            BROKERS=",".join(a["PLAINTEXT"] for a in addresses),
            LD_LIBRARY_PATH=f"{src / 'src'}:{src / 'src-cpp'}",
            **env_extra,
        )
        subtests = args.subtests or run.subtests
        if subtests:
            env["SUBTESTS"] = subtests
        cmd = ["./test-runner", "-K", "-p1"] + ([] if run.local else ["-L"])
        if args.quick:
            cmd.append("-Q")
        log(f"[{time.strftime('%H:%M:%S')}] {run.name}: TESTS={run.tests}")
        timed_out = run_test_runner(
            cmd, src / "tests", env, out_path, args.timeout, split[1] if split else None
        )
    elapsed = time.monotonic() - t0
    return parse_security(out_path.read_text(errors="replace"), run, timed_out, elapsed, args)


def parse_security(
    text: str, run: SecurityRun, timed_out: bool, elapsed: float, args: argparse.Namespace
) -> Result:
    """PASSED when every test of the run passed or skipped itself (``expect_fail``: when every
    one failed), FAILED otherwise, with the first failures as the reason. A test that failed
    counts as failed also when test-runner aborted before its summary table (it does when
    librdkafka threads outlive a failed test)."""
    lines = [ANSI.sub("", line).rstrip() for line in text.splitlines()]
    numbers = run.tests.split(",")
    states: dict[str, str] = {}
    reasons: list[str] = []
    for i, line in enumerate(lines):
        m = SUMMARY.match(line)
        if m and m["name"][:4] in numbers:
            states[m["name"]] = m["state"]
            continue
        f = FAILED_AT.match(line)
        if f and f["name"][:4] in numbers:
            states.setdefault(f["name"].split(" (")[0], "FAILED")
            if i + 1 < len(lines) and len(reasons) < 3:
                reasons.append(f"{f['name']}: {lines[i + 1].strip()}")
    failed = [n for n, st in states.items() if st not in ("PASSED", "SKIPPED")]
    if timed_out:
        result, reason = "TIMEOUT", f"killed after {args.timeout} s; " + "; ".join(reasons)
    elif not states:
        result, reason = "FAILED", "no result in test-runner's output"
    elif run.expect_fail:
        ok = len(failed) == len(states)
        result = "PASSED" if ok else "FAILED"
        reason = "; ".join(reasons) if ok else "expected to fail"
    elif failed:
        result, reason = "FAILED", "; ".join(reasons) or ", ".join(failed)
    elif all(st == "SKIPPED" for st in states.values()):
        result, reason = "SKIPPED", ""
    else:
        result, reason = "PASSED", ""
    scenario = run.protocol + (f"/{run.mechanism}" if run.mechanism else "")
    return Result(run.name, scenario, result, elapsed, reason)


def print_table(results: list[Result]) -> None:
    width = max(len(r.test) for r in results)
    print(f"| {'test':<{width}} | result  | seconds | reason")
    print(f"|-{'-' * width}-|---------|---------|-------")
    for r in results:
        reason = r.reason if r.result != "PASSED" else ""
        print(f"| {r.test:<{width}} | {r.result:<7} | {r.seconds:7.1f} | {reason[:300]}")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.result] = counts.get(r.result, 0) + 1
    print(f"\n{len(results)} tests: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))


def select(spec: str | None, brokers: int = 1) -> list[tuple[str, str]]:
    applicable = APPLICABLE + (THREE_BROKERS if brokers >= 3 else [])
    if not spec:
        return list(applicable)
    wanted = [w.strip() for w in spec.split(",") if w.strip()]
    chosen = [(name, sc) for name, sc in applicable if any(name.startswith(w) for w in wanted)]
    unknown = [w for w in wanted if not any(n.startswith(w) for n, _ in chosen)]
    if unknown:
        raise SystemExit(f"not in the applicable selection: {', '.join(unknown)} (see --list)")
    return chosen


def main(argv: list[str]) -> int:
    if argv[:1] == ["kafka-topics"]:
        return kafka_topics(argv[1:])
    if argv[:1] == ["kafka-acls"]:
        return kafka_acls(argv[1:])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up as on Ctrl-C
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tag", default=DEFAULT_TAG, help="librdkafka git tag (default %(default)s)")
    p.add_argument("--git-dir", type=Path, help="a librdkafka git directory (bare is fine)")
    p.add_argument(
        "--workdir", type=Path, help="scratch folder (default /tmp/odradek-librdkafka-<tag>)"
    )
    p.add_argument(
        "--tests", help="comma-separated test numbers or names (default: all applicable)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker setting, repeatable (e.g. group.initial.rebalance.delay.ms=0)",
    )
    p.add_argument(
        "--timeout", type=float, default=1200, help="seconds per test-runner run (0113: ~500 s)"
    )
    p.add_argument(
        "--timeout-multiplier",
        type=float,
        default=2.0,
        help="librdkafka's test.timeout.multiplier (default %(default)s)",
    )
    p.add_argument("--quick", action="store_true", help="librdkafka's quick mode (-Q)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="make -j")
    p.add_argument("--json", type=Path, help="also write the results as JSON")
    p.add_argument("--broker-log-level", default="warning")
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="brokers per run; more than 1 runs a ZooKeeper cluster (RF up to 3, as 0103 needs)",
    )
    p.add_argument("--subtests", help="librdkafka's SUBTESTS filter (a substring of subtest names)")
    p.add_argument("--debug", help="librdkafka debug contexts for the clients (e.g. cgrp,protocol)")
    p.add_argument("--list", action="store_true", help="print the selection and exit")
    p.add_argument(
        "--security",
        action="store_true",
        help="run the security tests (SECURITY: TLS, SASL, ACLs) instead; --tests picks runs",
    )
    args = p.parse_args(argv)
    if args.security:
        return main_security(args)
    selection = select(args.tests, args.brokers)
    if args.list:
        for name, sc in selection:
            print(f"{name}  ({sc})")
        print(f"\n{len(selection)} selected; not run:")
        for name, why in EXCLUDED.items():
            print(f"  {name}: {why}")
        return 0
    workdir = args.workdir or Path(f"/tmp/odradek-librdkafka-{args.tag}")
    src = prepare_source(args.tag, args.git_dir, workdir)
    build(src, args.jobs)
    kafka_path = write_shim(workdir)
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    results: list[Result] = []
    for num, scenario, names in groups(selection):
        batch = run_one(src, kafka_path, logs, num, scenario, names, args)
        for r in batch:
            log(f"    {r.test}: {r.result} {r.seconds:.1f}s {r.reason[:200]}")
        results.extend(batch)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    print(
        f"\nlibrdkafka {args.tag} test suite against odradek "
        f"(broker settings: {', '.join(args.set) or 'defaults'}; "
        f"{'quick (-Q)' if args.quick else 'full'} mode, "
        f"test.timeout.multiplier={args.timeout_multiplier})\n"
    )
    print_table(results)
    return 0 if all(r.result in ("PASSED", "SKIPPED") for r in results) else 1


def main_security(args: argparse.Namespace) -> int:
    runs = SECURITY
    if args.tests:
        wanted = [w.strip() for w in args.tests.split(",") if w.strip()]
        runs = [s for s in SECURITY if any(s.name.startswith(w) for w in wanted)]
    if args.list or not runs:
        for s in runs or SECURITY:
            print(f"{s.name}  (TESTS={s.tests}, {s.protocol} {s.mechanism})")
        return 0 if runs else 2
    workdir = args.workdir or Path(f"/tmp/odradek-librdkafka-{args.tag}")
    src = prepare_source(args.tag, args.git_dir, workdir)
    build(src, args.jobs)
    kafka_path = write_shim(workdir)
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    ssl_files = make_ssl_files(workdir / "ssl")
    results: list[Result] = []
    for run_ in runs:
        r = run_security(src, kafka_path, logs, run_, ssl_files, args)
        log(f"    {r.test}: {r.result} {r.seconds:.1f}s {r.reason[:200]}")
        results.append(r)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    print(
        f"\nlibrdkafka {args.tag} security tests against odradek "
        f"({'quick (-Q)' if args.quick else 'full'} mode, "
        f"test.timeout.multiplier={args.timeout_multiplier})\n"
    )
    print_table(results)
    return 0 if all(r.result in ("PASSED", "SKIPPED") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

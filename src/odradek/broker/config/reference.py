"""The configuration reference: every broker and topic key with its type, default, Kafka's
default where odradek's differs (and why), whether it can change at runtime, and a one-line
meaning. ``docs/configuration.md`` is ``render_markdown(...)``'s output, and ``odradek config
list`` prints the same rows; a test fails when the page and the code disagree.

Data only: which broker keys are dynamic is handed in (``broker.dynamic_config.DYNAMIC_KEYS``)
so that this module imports nothing above the key tables.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.broker.config.broker_keys import BROKER_KEYS
from odradek.broker.config.security_keys import SECURITY_KEY_SPECS
from odradek.broker.config.topic_keys import TOPIC_KEYS
from odradek.storage.config import INT_MAX, LONG_MAX

__all__ = [
    "KAFKA_DIFFERENT",
    "MEANINGS",
    "ODRADEK_ONLY",
    "UNUSED",
    "ReferenceRow",
    "broker_rows",
    "format_value",
    "render_markdown",
    "topic_rows",
]

KAFKA_DIFFERENT: dict[str, tuple[str, str]] = {
    "listeners": (
        "PLAINTEXT://:9092",
        "loopback only until you say otherwise (an open PLAINTEXT port)",
    ),
    "broker.id": ("-1", "one broker runs without ZooKeeper's id generation; id 0 is stable"),
    "log.dirs": ("(unset: log.dir)", "data next to where `odradek broker` runs, not in /tmp"),
    "log.dir": ("/tmp/kafka-logs", "`log.dirs` has the default; /tmp is cleared on reboot"),
    "offsets.topic.replication.factor": (
        "3",
        "a single broker must be able to create __consumer_offsets; set 3 on a cluster "
        "(`odradek cluster up` does)",
    ),
    "transaction.state.log.replication.factor": (
        "3",
        "a single broker must be able to create __transaction_state; set 3 on a cluster "
        "(`odradek cluster up` does)",
    ),
    "transaction.state.log.min.isr": (
        "2",
        "matches the replication factor default of 1; set 2 with a replication factor of 3 "
        "(`odradek cluster up` does)",
    ),
    "zookeeper.connect": ("(required)", "empty runs one broker alone, metadata in log.dirs"),
    "zookeeper.connection.timeout.ms": (
        "(unset: zookeeper.session.timeout.ms)",
        "the same value, spelled out",
    ),
}
"""Broker keys whose default is not Kafka 3.9's: (Kafka's default, why odradek differs)."""

ODRADEK_ONLY = frozenset(
    {
        "http.listeners",
        "http.authentication.skip.paths",
        "http.session.timeout.ms",
        "schema.registry.listeners",
        "storage.engine",
    }
)
"""Keys Kafka does not have."""

UNUSED: dict[str, str] = {
    "background.threads": "one event loop does the background work",
    "num.network.threads": "one event loop serves every connection",
    "num.io.threads": "one event loop serves every request",
    "num.recovery.threads.per.data.dir": "logs are recovered one after the other",
    "socket.send.buffer.bytes": "the operating system's socket buffer sizes are used",
    "socket.receive.buffer.bytes": "the operating system's socket buffer sizes are used",
    "max.incremental.fetch.session.cache.slots": "fetch sessions are not cached (KIP-227)",
    "log.flush.start.offset.checkpoint.interval.ms": (
        "the log start offset is checkpointed when it moves"
    ),
    "log.roll.jitter.ms": "segments roll without jitter",
    "log.roll.jitter.hours": "segments roll without jitter",
    "log.preallocate": "segments are not preallocated",
    "log.message.format.version": "batches are always written as v2",
    "log.message.timestamp.difference.max.ms": "timestamps are not checked against the clock",
    "log.message.timestamp.before.max.ms": "timestamps are not checked against the clock",
    "log.message.timestamp.after.max.ms": "timestamps are not checked against the clock",
    "log.local.retention.ms": "there is no tiered storage",
    "log.local.retention.bytes": "there is no tiered storage",
    "compression.type": "batches are stored as produced (no recompression)",
    "compression.gzip.level": "batches are stored as produced",
    "compression.lz4.level": "batches are stored as produced",
    "compression.zstd.level": "batches are stored as produced",
    **{
        k: "Kerberos (GSSAPI) and client-side logins are not served"
        for k in BROKER_KEYS
        if k.startswith(("sasl.kerberos.", "sasl.login."))
    },
    "ssl.protocol": "ssl.enabled.protocols decides",
}
"""Broker keys that are accepted, validated, stored and shown, and not acted on."""

MEANINGS: dict[str, str] = {
    # listeners and identity
    "listeners": "Where the broker listens: NAME://host:port,... (see listener.security.protocol.map).",
    "advertised.listeners": "The address clients are told; defaults to listeners.",
    "http.listeners": "The console, /metrics and /health (http://host:port, or https://host:port "
    "with the ssl.keystore.* keys); empty turns it off.",
    "http.authentication.skip.paths": "With an authorizer the console needs a login; these paths "
    "(comma-separated) stay open, as a JMX exporter's /metrics does. Empty: every path needs one "
    "(/metrics then also DESCRIBE on the cluster).",
    "http.session.timeout.ms": "How long a console login (its session cookie) lasts; never past "
    "a bearer token's exp.",
    "schema.registry.listeners": "The Confluent-compatible schema registry (http://host:port or "
    "https://host:port); empty turns it off. With an authorizer: HTTP Basic with SCRAM users, "
    "subjects authorized on TOPIC ACLs.",
    "broker.id": "This broker's id; unique in a cluster.",
    "node.id": "Alias of broker.id when set.",
    "broker.rack": "This broker's rack (registered in /brokers/ids/<id>); replicas of a "
    "partition go to distinct racks, and consumers with client.rack can fetch from it.",
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector sends "
    "a consumer with a rack to an in-sync replica in that rack (KIP-392); unset: the leader.",
    "log.dirs": "Data directories, comma separated.",
    "log.dir": "The data directory when log.dirs is not set.",
    "storage.engine": "file (Kafka's on-disk format) or memory (nothing survives a stop).",
    # authorization
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer or "
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty allows all.",
    "super.users": "Principals allowed everything, ;-separated (User:admin;User:ops).",
    "allow.everyone.if.no.acl.found": "Allow a resource that no ACL names (default: deny).",
    # client quotas
    "quota.window.num": "Samples a client's rate is measured over (client quotas).",
    "quota.window.size.seconds": "Length of one sample of a client's rate, in seconds.",
    "controller.quota.window.num": "Samples of controller_mutation_rate: its token bucket "
    "holds this many windows' worth of the quota.",
    "controller.quota.window.size.seconds": "Length of one controller_mutation_rate sample, "
    "in seconds.",
    # client telemetry
    "telemetry.max.bytes": "Largest metrics payload a client may push (KIP-714 client telemetry).",
    # topics
    "num.partitions": "Partitions of an automatically created topic.",
    "default.replication.factor": "Replicas of an automatically created topic.",
    "auto.create.topics.enable": "Create a topic when a client asks for its metadata.",
    "delete.topic.enable": "Allow DeleteTopics.",
    "message.max.bytes": "Largest record batch a topic accepts (topic: max.message.bytes).",
    "socket.request.max.bytes": "Largest request the broker reads.",
    # log segments and retention
    "log.segment.bytes": "Size at which a segment rolls.",
    "log.roll.ms": "Age at which a segment rolls (overrides log.roll.hours).",
    "log.roll.hours": "Age at which a segment rolls, in hours.",
    "log.retention.ms": "Delete segments older than this; -1 keeps them (overrides minutes).",
    "log.retention.minutes": "Retention in minutes (overrides log.retention.hours).",
    "log.retention.hours": "Retention in hours.",
    "log.retention.bytes": "Delete old segments beyond this size per partition; -1 is no limit.",
    "log.index.interval.bytes": "Bytes between two offset-index entries.",
    "log.index.size.max.bytes": "Largest offset or time index file of a segment.",
    "log.flush.interval.messages": "fsync a partition after this many records.",
    "log.flush.interval.ms": "fsync a partition after this long (default: the scheduler's).",
    "log.flush.scheduler.interval.ms": "How often to look for partitions to fsync.",
    "log.retention.check.interval.ms": "How often retention runs.",
    "log.flush.offset.checkpoint.interval.ms": "How often the recovery points are checkpointed.",
    "log.flush.start.offset.checkpoint.interval.ms": "How often log start offsets are saved.",
    "log.cleanup.policy": "delete, compact or both.",
    "log.message.timestamp.type": "CreateTime (the producer's) or LogAppendTime (the broker's).",
    "compression.type": "Compression of stored batches; producer keeps what was sent.",
    "log.segment.delete.delay.ms": "Wait before a deleted segment's files are removed.",
    "log.roll.jitter.ms": "Random jitter subtracted from the roll time.",
    "log.roll.jitter.hours": "Roll jitter in hours.",
    "log.preallocate": "Preallocate segment files.",
    "log.message.format.version": "Deprecated record format version.",
    "log.message.downconversion.enable": "Down-convert batches for old Fetch versions.",
    "log.message.timestamp.difference.max.ms": "Deprecated: largest timestamp skew accepted.",
    "log.message.timestamp.before.max.ms": "Largest age of a record's timestamp accepted.",
    "log.message.timestamp.after.max.ms": "Largest future skew of a record's timestamp accepted.",
    "log.local.retention.ms": "Local retention with tiered storage (-2: log.retention.ms).",
    "log.local.retention.bytes": "Local retention size with tiered storage (-2: retention.bytes).",
    "compression.gzip.level": "gzip level when the broker compresses.",
    "compression.lz4.level": "lz4 level when the broker compresses.",
    "compression.zstd.level": "zstd level when the broker compresses.",
    # cleaner
    "log.cleaner.enable": "Run the log cleaner (compaction).",
    "log.cleaner.threads": "Cleaner threads.",
    "log.cleaner.backoff.ms": "Sleep when there is nothing to clean.",
    "log.cleaner.dedupe.buffer.size": "Memory for the key map of all cleaner threads.",
    "log.cleaner.io.buffer.size": "Memory for the cleaner's read and write buffers.",
    "log.cleaner.io.buffer.load.factor": "Fill ratio of the key map.",
    "log.cleaner.io.max.bytes.per.second": "Throttle of the cleaner's reads and writes.",
    "log.cleaner.min.cleanable.ratio": "Dirty share of a log before it is cleaned.",
    "log.cleaner.delete.retention.ms": "How long tombstones are kept after cleaning.",
    "log.cleaner.min.compaction.lag.ms": "Youngest record age the cleaner may compact.",
    "log.cleaner.max.compaction.lag.ms": "Oldest a record may get before it must be compacted.",
    # replication
    "min.insync.replicas": "Replicas that must have a write for acks=all to succeed.",
    "unclean.leader.election.enable": "Let a replica outside the ISR become leader (data loss).",
    "num.replica.fetchers": "Fetchers (each its own connection) per leader broker.",
    "replica.fetch.max.bytes": "Bytes a follower asks for per partition.",
    "replica.lag.time.max.ms": "A follower that has not caught up for this long leaves the ISR.",
    "replica.fetch.wait.max.ms": "How long a follower's fetch waits at the leader.",
    "replica.fetch.min.bytes": "Bytes a follower's fetch waits for.",
    "replica.fetch.response.max.bytes": "Bytes of one follower fetch response.",
    "replica.fetch.backoff.ms": "Sleep after a failed follower fetch.",
    "replica.socket.timeout.ms": "Timeout of a follower's requests.",
    "replica.high.watermark.checkpoint.interval.ms": "How often high watermarks are saved.",
    "fetch.max.bytes": "Bytes of one consumer fetch response.",
    "max.incremental.fetch.session.cache.slots": "Incremental fetch sessions kept (KIP-227).",
    # connections
    "background.threads": "Threads for background work.",
    "max.connections": "Connections the broker accepts.",
    "max.connections.per.ip": "Connections one address may open.",
    "max.connection.creation.rate": "New connections per second.",
    "num.network.threads": "Network threads.",
    "num.io.threads": "Request threads.",
    "num.recovery.threads.per.data.dir": "Threads that recover logs at start.",
    "socket.send.buffer.bytes": "SO_SNDBUF of client connections (-1: the OS default).",
    "socket.receive.buffer.bytes": "SO_RCVBUF of client connections (-1: the OS default).",
    "connections.max.idle.ms": "Close connections idle for this long.",
    "request.timeout.ms": "Timeout of the broker's own requests to other brokers.",
    # groups
    "group.coordinator.rebalance.protocols": "Group protocols: classic, optionally consumer.",
    "group.consumer.session.timeout.ms": "KIP-848 groups: default session timeout.",
    "group.consumer.min.session.timeout.ms": "KIP-848 groups: lowest session timeout.",
    "group.consumer.max.session.timeout.ms": "KIP-848 groups: highest session timeout.",
    "group.consumer.heartbeat.interval.ms": "KIP-848 groups: default heartbeat interval.",
    "group.consumer.min.heartbeat.interval.ms": "KIP-848 groups: lowest heartbeat interval.",
    "group.consumer.max.heartbeat.interval.ms": "KIP-848 groups: highest heartbeat interval.",
    "group.share.session.timeout.ms": "Share groups: default session timeout.",
    "group.share.min.session.timeout.ms": "Share groups: lowest session timeout.",
    "group.share.max.session.timeout.ms": "Share groups: highest session timeout.",
    "group.share.heartbeat.interval.ms": "Share groups: default heartbeat interval.",
    "group.share.min.heartbeat.interval.ms": "Share groups: lowest heartbeat interval.",
    "group.share.max.heartbeat.interval.ms": "Share groups: highest heartbeat interval.",
    "group.share.record.lock.duration.ms": "Share groups: default record lock.",
    "group.share.min.record.lock.duration.ms": "Share groups: shortest record lock.",
    "group.share.max.record.lock.duration.ms": "Share groups: longest record lock.",
    "offsets.topic.num.partitions": "Partitions of __consumer_offsets (fixed once created).",
    "offsets.topic.replication.factor": "Replicas of __consumer_offsets.",
    "offsets.topic.segment.bytes": "Segment size of __consumer_offsets.",
    "offsets.topic.compression.codec": "Compression of offset commits (0 none .. 4 zstd).",
    "offsets.retention.minutes": "Drop an empty group's offsets after this long.",
    "offsets.retention.check.interval.ms": "How often expired offsets are removed.",
    "offsets.commit.timeout.ms": "Wait for an offset commit to be replicated.",
    "group.initial.rebalance.delay.ms": "Wait for more members before a new group's first join.",
    "group.min.session.timeout.ms": "Lowest session timeout a classic member may ask for.",
    "group.max.session.timeout.ms": "Highest session timeout a classic member may ask for.",
    "group.max.size": "Members a group may have.",
    "offset.metadata.max.bytes": "Longest metadata string of a committed offset.",
    # transactions and producers
    "transaction.state.log.replication.factor": "Replicas of __transaction_state.",
    "transaction.state.log.num.partitions": "Partitions of __transaction_state.",
    "transaction.state.log.segment.bytes": "Segment size of __transaction_state.",
    "transaction.max.timeout.ms": "Longest transaction timeout a producer may ask for.",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "How often timed-out transactions are aborted."
    ),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "How often expired transactional ids are removed."
    ),
    "transaction.state.log.min.isr": "min.insync.replicas of __transaction_state.",
    "transactional.id.expiration.ms": "Forget a transactional id unused for this long.",
    "producer.id.expiration.ms": "Forget an idle producer's state after this long.",
    "transaction.partition.verification.enable": "Leaders verify transactional writes (KIP-890).",
    **{name: meaning for name, _parse, _default, meaning in SECURITY_KEY_SPECS},
    # SASL (per-listener settings Kafka accepts dynamically)
    "sasl.kerberos.service.name": "Kerberos service name.",
    "sasl.kerberos.kinit.cmd": "Kerberos kinit command.",
    "sasl.kerberos.ticket.renew.window.factor": "Kerberos ticket renewal point.",
    "sasl.kerberos.ticket.renew.jitter": "Kerberos renewal jitter.",
    "sasl.kerberos.min.time.before.relogin": "Kerberos relogin pause.",
    "sasl.login.refresh.window.factor": "Login refresh point.",
    "sasl.login.refresh.window.jitter": "Login refresh jitter.",
    "sasl.login.refresh.min.period.seconds": "Shortest login refresh period.",
    "sasl.login.refresh.buffer.seconds": "Login refresh buffer.",
    # cluster mode
    "zookeeper.connect": "host:port[,host:port][/chroot]: join a cluster; empty runs alone.",
    "zookeeper.connection.timeout.ms": "Wait for the ZooKeeper connection at start.",
    "zookeeper.session.timeout.ms": "ZooKeeper session timeout: a broker silent this long is dead.",
    "auto.leader.rebalance.enable": "Move leadership back to preferred replicas.",
    "leader.imbalance.check.interval.seconds": "How often the controller checks leader balance.",
    "leader.imbalance.per.broker.percentage": "Imbalance that triggers a rebalance.",
    "controlled.shutdown.enable": "Move leadership away before a broker stops.",
    "controlled.shutdown.max.retries": "Attempts of a controlled shutdown.",
    "controlled.shutdown.retry.backoff.ms": "Pause between attempts.",
    "controller.socket.timeout.ms": "Timeout of the controller's requests to brokers.",
    # topic keys (those without a broker key of the same meaning)
    "cleanup.policy": "delete, compact or both.",
    "retention.ms": "Delete segments older than this; -1 keeps them.",
    "retention.bytes": "Delete old segments beyond this size per partition; -1 is no limit.",
    "segment.bytes": "Size at which a segment rolls.",
    "segment.ms": "Age at which a segment rolls.",
    "segment.index.bytes": "Largest offset or time index file of a segment.",
    "index.interval.bytes": "Bytes between two offset-index entries.",
    "max.message.bytes": "Largest record batch the topic accepts.",
    "message.timestamp.type": "CreateTime (the producer's) or LogAppendTime (the broker's).",
    "flush.messages": "fsync after this many records.",
    "flush.ms": "fsync after this long.",
    "delete.retention.ms": "How long tombstones are kept after cleaning.",
    "min.compaction.lag.ms": "Youngest record age the cleaner may compact.",
    "max.compaction.lag.ms": "Oldest a record may get before it must be compacted.",
    "min.cleanable.dirty.ratio": "Dirty share of the log before it is cleaned.",
    "file.delete.delay.ms": "Wait before a deleted segment's files are removed.",
    "preallocate": "Preallocate segment files.",
    "message.format.version": "Deprecated record format version.",
    "message.downconversion.enable": "Down-convert batches for old Fetch versions.",
    "message.timestamp.difference.max.ms": "Deprecated: largest timestamp skew accepted.",
    "message.timestamp.before.max.ms": "Largest age of a record's timestamp accepted.",
    "message.timestamp.after.max.ms": "Largest future skew of a record's timestamp accepted.",
    "segment.jitter.ms": "Random jitter subtracted from the roll time.",
    "leader.replication.throttled.replicas": "Replicas throttled on the leader side.",
    "follower.replication.throttled.replicas": "Replicas throttled on the follower side.",
    "remote.storage.enable": "Tiered storage for this topic (only false is accepted).",
    "local.retention.ms": "Local retention with tiered storage.",
    "local.retention.bytes": "Local retention size with tiered storage.",
    "remote.log.copy.disable": "Stop copying to tiered storage.",
    "remote.log.delete.on.disable": "Delete remote data when tiered storage is disabled.",
}
"""One line per key: what it means (Kafka's meaning; ``UNUSED`` and a topic key's ``ignored``
say where odradek does not act on it)."""


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    """One key of the reference. ``kafka_default`` is None where odradek's is Kafka's."""

    name: str
    type: str
    default: str
    kafka_default: str | None
    dynamic: bool
    meaning: str
    note: str
    """Why the default differs, or why the key is not acted on; "" otherwise."""


def format_value(value: Any) -> str:
    """A default as the page shows it: ``true``/``false``, ``(unset)`` for None, the Java
    constants by name."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity"
    if isinstance(value, int) and value == LONG_MAX:
        return "Long.MAX_VALUE"
    if isinstance(value, int) and value == INT_MAX:
        return "Integer.MAX_VALUE"
    if value == "":
        return "(empty)"
    return str(value)


def _type_of(parse: Any, default: Any) -> str:
    """boolean, int, long, double, list or string, from the parser and the default."""
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, float):
        return "double"
    probe = getattr(parse, "__qualname__", "")
    if probe.startswith("_float"):
        return "double"
    if "_bool" in probe or probe.startswith("_false_only"):
        return "boolean"
    if probe.startswith(("_int", "_gzip_level")) or isinstance(default, int):
        # _int(lo, hi): Kafka's long keys are the ones bounded by Long.MAX_VALUE
        cells = [c.cell_contents for c in (getattr(parse, "__closure__", None) or ())]
        return "long" if LONG_MAX in cells else "int"
    if probe.startswith(("_dirs", "_listeners", "_advertised", "_http", "_cleanup", "_rebal")):
        return "list"
    if probe.startswith(("_throttled",)):
        return "list"
    return "string"


def broker_rows(dynamic_keys: Collection[str]) -> list[ReferenceRow]:
    """Every broker key, sorted by name."""
    rows: list[ReferenceRow] = []
    for name in sorted(BROKER_KEYS):
        key = BROKER_KEYS[name]
        kafka = KAFKA_DIFFERENT.get(name)
        if name in ODRADEK_ONLY:
            kafka_default: str | None = "(not in Kafka)"
            note = "odradek's own key"
        elif kafka is not None:
            kafka_default, note = kafka
        else:
            kafka_default, note = None, UNUSED.get(name, "")
            if note:
                note = "not acted on: " + note
        rows.append(
            ReferenceRow(
                name,
                _type_of(key.parse, key.default),
                format_value(key.default),
                kafka_default,
                name in dynamic_keys,
                MEANINGS[name],
                note,
            )
        )
    return rows


def topic_rows(broker_defaults: Mapping[str, str]) -> list[ReferenceRow]:
    """Every topic key, sorted by name; ``broker_defaults``: the default of each topic key as
    the broker's defaults give it (``BrokerConfig.default().topic_defaults()``)."""
    rows: list[ReferenceRow] = []
    for name in sorted(TOPIC_KEYS):
        key = TOPIC_KEYS[name]
        raw = broker_defaults[name]
        if key.broker_key is not None and key.broker_key in BROKER_KEYS:
            spec = BROKER_KEYS[key.broker_key]
            default = format_value(spec.parse(raw)) if raw not in ("", "None") else "(empty)"
            source = f" (from {key.broker_key})" if key.broker_key != name else ""
        else:
            default, source = format_value(raw), ""
        note = f"not acted on: {key.ignored}" if key.ignored else ""
        rows.append(
            ReferenceRow(
                name,
                _type_of(key.parse, None),
                default + source,
                None,
                not key.read_only,
                MEANINGS[name],
                note,
            )
        )
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: list[ReferenceRow]) -> list[str]:
    out = [
        "| key | type | default | Kafka's default | dynamic | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        kafka = r.kafka_default if r.kafka_default is not None else "same"
        meaning = r.meaning + (f" *{r.note}.*" if r.note else "")
        dynamic = "yes" if r.dynamic else "no"
        out.append(
            f"| `{r.name}` | {r.type} | `{_cell(r.default)}` | {_cell(kafka)} | {dynamic} "
            f"| {_cell(meaning)} |"
        )
    return out


def render_markdown(dynamic_keys: Collection[str], broker_defaults: Mapping[str, str]) -> str:
    """The whole of docs/configuration.md."""
    brokers = broker_rows(dynamic_keys)
    topics = topic_rows(broker_defaults)
    different = [r for r in brokers if r.kafka_default is not None and r.name not in ODRADEK_ONLY]
    lines = [
        "# Configuration reference",
        "",
        "Generated from the code (`odradek config list --markdown > docs/configuration.md`);",
        "`tests/tools/test_configuration_page.py` fails when this page and the code disagree.",
        "Broker keys go in `server.properties` (`odradek broker --config FILE`) or on the",
        "command line (`--set key=value`); `odradek config list --changed --config FILE` prints",
        "the keys a file changes. Topic keys are set per topic (`odradek topics create",
        "--config key=value`, AlterConfigs); their default comes from the broker key named.",
        "How dynamic updates, synonyms and validation work: [configs.md](configs.md).",
        "",
        "*dynamic*: a broker key that IncrementalAlterConfigs can change while the broker runs",
        "(per broker or cluster-wide), or a topic key that can change on an existing topic.",
        "*Kafka's default*: Kafka 3.9's, where odradek's differs.",
        "",
        f"## Defaults that differ from Kafka's ({len(different)})",
        "",
        "| key | odradek | Kafka | why |",
        "|---|---|---|---|",
    ]
    for r in different:
        lines.append(
            f"| `{r.name}` | `{_cell(r.default)}` | `{_cell(r.kafka_default or '')}` "
            f"| {_cell(r.note)} |"
        )
    unused_broker = [r.name for r in brokers if r.note.startswith("not acted on")]
    unused_topic = [r.name for r in topics if r.note.startswith("not acted on")]
    lines += [
        "",
        f"## Keys accepted and not acted on ({len(unused_broker) + len(unused_topic)})",
        "",
        "Accepted (so that Kafka's configuration files and tools work), validated, stored and",
        "shown by DescribeConfigs; the broker does not act on them. Each row below says why.",
        "",
        "Broker keys: " + ", ".join(f"`{n}`" for n in unused_broker) + ".",
        "",
        "Topic keys: " + ", ".join(f"`{n}`" for n in unused_topic) + ".",
        "",
        f"## Broker keys ({len(brokers)})",
        "",
        *_table(brokers),
        "",
        f"## Topic keys ({len(topics)})",
        "",
        *_table(topics),
        "",
    ]
    return "\n".join(lines)

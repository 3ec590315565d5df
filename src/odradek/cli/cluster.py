"""`odradek cluster`: a local development cluster on ZooKeeper.

    odradek cluster up [--brokers 3] [--dir ./odradek-cluster] [--port 9092] [--http-port 9644]
                       [--security] [--set key=value ...]
    odradek cluster status [--dir ./odradek-cluster | --bootstrap-server host:port]
                           [--command-config client.properties]
    odradek cluster down [--dir ./odradek-cluster]

``up`` starts a supervisor process in the background (its own session) that runs one Apache
ZooKeeper (Debian's jars, ``odradek.cluster.zookeeper``) and N brokers (``odradek broker``,
broker.id 1..N, each with its data directory ``<dir>/broker-<id>`` and port ``--port`` + id - 1,
or free ports with ``--port 0``), with ``zookeeper.connect=<zk>/odradek``. Each broker serves
its console, ``/metrics`` and ``/health`` on ``--http-port`` + id - 1 (free ports with
``--http-port 0``; ``--set http.listeners=`` turns the consoles off). New topics,
``__consumer_offsets`` and ``__transaction_state`` get Kafka's cluster defaults (replication
factor 3, ``transaction.state.log.min.isr`` 2; fewer with fewer brokers).

It prints the bootstrap servers and each broker's addresses once every broker is listening and
the cluster shows all of them. The supervisor writes ``<dir>/cluster.json`` (``{"pid",
"zookeeper", "bootstrap_servers", "brokers": [{"id", "port", "pid", "log", "console"}]}``,
console ``""`` when off) and stops everything on SIGTERM (``down``); the brokers and ZooKeeper
also stop when the supervisor dies.

``--security`` starts a cluster that only speaks TLS with SCRAM: ``up`` makes a CA and one
certificate per broker (``<dir>/security/``: ``ca.pem``, ``broker-<id>.pem`` Kafka's PEM key
store; the CA's key is not kept), a ``broker`` user for the brokers among themselves and an
``admin`` user, both super users (``authorizer.class.name`` AclAuthorizer, nobody else may do
anything until ACLs say so), with random passwords stored in ZooKeeper as SCRAM-SHA-512
credentials (salted, as Kafka stores them) before the brokers start. Every broker has one
listener, ``SASL_SSL`` (clients and brokers, SCRAM-SHA-512). The admin password is printed once;
``<dir>/client.properties`` (owner-only) holds what a client needs: ``bootstrap.servers``,
``security.protocol``, ``sasl.mechanism``, ``sasl.username``/``sasl.password`` and
``ssl.ca.location``, keys that librdkafka (confluent-kafka, ``kcat -F``) and
``odradek ... --command-config`` read alike. The consoles serve HTTPS with the broker's
certificate (trusted through ``ca.pem``) and require a login: the admin user and password, or
any SCRAM user, who sees what their ACLs allow. The brokers' own password is in
``<dir>/security/broker-secrets.properties`` (owner-only, read with ``odradek broker
--config``); the consoles' own clients connect with it, over SASL_SSL like the brokers.

``status`` asks a broker for Metadata: the live brokers with their addresses (and, from
``cluster.json``, their consoles), the controller, and the under-replicated partitions (ISR
smaller than the replicas) and offline ones (no leader). A secured cluster is asked over
SASL_SSL with its ``client.properties`` (or ``--command-config``), whose path is printed.
``cluster.json`` then also has ``"security": true`` and ``"client_properties"``.
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ._clientopts import fail

app = typer.Typer(add_completion=False, no_args_is_help=True)

STATE_FILE = "cluster.json"
DEFAULT_DIR = Path("odradek-cluster")
SECURITY_DIR = "security"
CLIENT_PROPERTIES = "client.properties"
SECRETS_FILE = "broker-secrets.properties"
USERS_FILE = "scram-users.json"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 8192
SUPER_USERS = ("admin", "broker")
Dir = Annotated[
    Path, typer.Option("--dir", "-d", help="The cluster's directory (state, data, logs).")
]


def _state(dir_: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((dir_ / STATE_FILE).read_text())
        return data
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@app.command()
def up(
    brokers: Annotated[
        int, typer.Option("--brokers", "-n", min=1, max=32, help="How many brokers.")
    ] = 3,
    dir_: Dir = DEFAULT_DIR,
    port: Annotated[
        int, typer.Option("--port", "-p", help="Port of broker 1 (0: free ports).")
    ] = 9092,
    http_port: Annotated[
        int,
        typer.Option("--http-port", help="Console port of broker 1 (0: free ports)."),
    ] = 9644,
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="Broker key=value, repeatable.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the cluster.")
    ] = 90.0,
    security: Annotated[
        bool,
        typer.Option(
            "--security",
            help="TLS + SCRAM-SHA-512 everywhere, generated certificates, an admin super user.",
        ),
    ] = False,
) -> None:
    """Start ZooKeeper and N brokers in the background; print the bootstrap servers."""
    from odradek.cluster.zookeeper import zookeeper_available

    if not zookeeper_available():
        fail("Debian's zookeeper package (or java) is not installed: apt-get install zookeeper")
    dir_ = dir_.resolve()
    state = _state(dir_)
    if state is not None and _alive(int(state["pid"])):
        fail(f"a cluster is already running from {dir_} (odradek cluster down -d {dir_})")
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / STATE_FILE).unlink(missing_ok=True)
    admin_password = prepare_security(dir_, brokers) if security else None
    cmd = [sys.executable, "-m", "odradek.cli.cluster", str(dir_), str(brokers), str(port)]
    cmd += [str(http_port)]
    if security:
        cmd.append("--security")
    cmd += [f"{s}" for s in (set_ or [])]
    with open(dir_ / "supervisor.log", "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state(dir_)
        if state is not None and state.get("ready"):
            typer.echo(f"ZooKeeper: {state['zookeeper']}")
            typer.echo(f"bootstrap servers: {state['bootstrap_servers']}")
            for b in state["brokers"]:
                console = f"\tconsole {b['console']}" if b.get("console") else ""
                typer.echo(f"broker {b['id']}: 127.0.0.1:{b['port']}{console}")
            if admin_password is not None:
                typer.echo("security: SASL_SSL with SCRAM-SHA-512 on every listener")
                typer.echo(f"admin password (shown once): {admin_password}")
                if any(b.get("console") for b in state["brokers"]):
                    typer.echo("consoles: log in as admin with that password (HTTPS, CA in security/ca.pem)")
                typer.echo(f"client properties: {state['client_properties']}")
            return
        if proc.poll() is not None:
            fail(f"the cluster did not start; see {dir_ / 'supervisor.log'}")
        time.sleep(0.2)
    proc.terminate()
    fail(f"the cluster was not ready within {timeout} s; see {dir_ / 'supervisor.log'}")


@app.command()
def down(dir_: Dir = DEFAULT_DIR) -> None:
    """Stop the cluster started from --dir (brokers first, then ZooKeeper)."""
    dir_ = dir_.resolve()
    state = _state(dir_)
    if state is None or not _alive(int(state["pid"])):
        typer.echo(f"no cluster is running from {dir_}")
        return
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    (dir_ / STATE_FILE).unlink(missing_ok=True)
    typer.echo("cluster stopped")


def send(servers: str, request: Any, timeout: float = 30.0) -> Any:
    """``request`` (a kio request entity) to the first of ``servers`` that answers; its response."""
    from odradek.protocol.messages import decode_response, encode_request

    frame = encode_request(request, correlation_id=1, client_id="odradek-cli")
    key, version = int(request.__api_key__), int(request.__version__)
    last: Exception | None = None
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as s:
                s.sendall(frame)
                size = struct.unpack(">i", _read(s, 4))[0]
                return decode_response(key, version, _read(s, size), header=True)
        except (OSError, ValueError) as exc:
            last = exc
    raise ConnectionError(f"no broker of {servers} answered: {last}")


def metadata(
    bootstrap: str, timeout: float = 10.0, properties: dict[str, str] | None = None
) -> Any:
    """A Metadata v12 answer (all topics) from the first reachable bootstrap server;
    ``properties`` (a client's security properties) for a secured listener."""
    from kio.schema.metadata.v12.request import MetadataRequest

    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    if properties and properties.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
        return send_secured(bootstrap, request, properties, timeout)
    return send(bootstrap, request, timeout)


def send_secured(
    servers: str, request: Any, properties: dict[str, str], timeout: float = 30.0
) -> Any:
    """``request`` over TLS and/or SASL as ``properties`` say (``--command-config``'s keys) to
    the first of ``servers`` that answers; its response."""
    import asyncio

    from odradek.broker.inter_broker_client import (
        InterBrokerClient,
        InterBrokerClientConfig,
        Node,
    )
    from odradek.cli._broker_call import connection_factory

    factory = connection_factory(properties, "odradek-users")
    last: Exception | None = None
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")

        async def ask(host: str = host or "127.0.0.1", port: int = int(port)) -> Any:
            client = InterBrokerClient(
                -1,
                config=InterBrokerClientConfig(request_timeout_ms=int(timeout * 1000)),
                connection_factory=factory,
            )
            try:
                return await client.send(Node(-1, host, port), "odradek-cli", request)
            finally:
                await client.close()

        try:
            return asyncio.run(asyncio.wait_for(ask(), timeout))
        except Exception as exc:
            last = exc
    raise ConnectionError(f"no broker of {servers} answered: {last}")


def to_controller(
    bootstrap: str, request: Any, timeout: float = 60.0, properties: dict[str, str] | None = None
) -> Any:
    """``request`` to the active controller (found through Metadata); ``properties`` (a
    client's security properties, ``--command-config``) for a secured listener."""
    md = metadata(bootstrap, properties=properties)
    for b in md.brokers:
        if b.node_id == md.controller_id:
            if properties and properties.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
                return send_secured(f"{b.host}:{b.port}", request, properties, timeout)
            return send(f"{b.host}:{b.port}", request, timeout)
    raise ConnectionError("the cluster has no controller")


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def status_lines(md: Any, consoles: dict[int, str] | None = None) -> list[str]:
    """What ``status`` prints for a Metadata response; ``consoles``: broker id -> console URL
    (a broker line is ``\t<id>\t<host>:<port>`` then ``\tconsole <url>`` when known)."""
    lines = [f"cluster id: {md.cluster_id}", f"controller: {md.controller_id}", "brokers:"]
    for b in sorted(md.brokers, key=lambda b: b.node_id):
        console = (consoles or {}).get(b.node_id)
        lines.append(
            f"\t{b.node_id}\t{b.host}:{b.port}" + (f"\tconsole {console}" if console else "")
        )
    under, offline = [], []
    for t in sorted(md.topics, key=lambda t: t.name or ""):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            desc = (
                f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}"
                f"\tReplicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}"
            )
            if p.leader_id < 0:
                offline.append(desc)
            elif len(p.isr_nodes) < len(p.replica_nodes):
                under.append(desc)
    lines.append(f"under-replicated partitions: {len(under)}")
    lines.extend(under)
    lines.append(f"offline partitions: {len(offline)}")
    lines.extend(offline)
    return lines


@app.command()
def status(
    dir_: Dir = DEFAULT_DIR,
    bootstrap_server: Annotated[
        str | None,
        typer.Option("--bootstrap-server", "-b", help="host:port (default: from --dir)."),
    ] = None,
    command_config: Annotated[
        Path | None,
        typer.Option(
            "--command-config",
            help="Client security properties (default: a secured cluster's client.properties).",
        ),
    ] = None,
) -> None:
    """Brokers and their addresses, the controller, under-replicated and offline partitions."""
    state = _state(dir_.resolve())
    if command_config is None and state is not None and state.get("client_properties"):
        command_config = Path(state["client_properties"])
    properties = read_properties(command_config) if command_config is not None else None
    consoles = {
        int(b["id"]): str(b["console"])
        for b in (state or {}).get("brokers", [])
        if b.get("console")
    }
    if bootstrap_server is None:
        if state is None:
            fail(f"no cluster state in {dir_.resolve()}; give --bootstrap-server")
            return
        bootstrap_server = str(state["bootstrap_servers"])
    try:
        md = metadata(bootstrap_server, properties=properties)
    except ConnectionError as exc:
        fail(str(exc))
        return
    for line in status_lines(md, consoles):
        typer.echo(line)
    if command_config is not None:
        typer.echo(f"client properties: {command_config.resolve()}")


def read_properties(path: Path) -> dict[str, str]:
    """A client's ``key=value`` properties file (Java's format)."""
    from odradek.broker.config import load_properties_file

    return {k: str(v) for k, v in load_properties_file(path).items()}


# -- --security: certificates, users, client properties -------------------------------------


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (0600 from the first byte)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _jaas_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def prepare_security(dir_: Path, brokers: int) -> str:
    """Make ``<dir>/security/`` (CA, broker key stores, the brokers' secrets, the SCRAM
    credentials the supervisor writes to ZooKeeper) and ``<dir>/client.properties``; returns
    the admin password (nowhere else but in the owner-only client.properties)."""
    import secrets

    from odradek.security.certificates import CertificateAuthority
    from odradek.security.scram import scram_credential

    sec = dir_ / SECURITY_DIR
    sec.mkdir(parents=True, exist_ok=True)
    os.chmod(sec, 0o700)
    ca = CertificateAuthority(f"odradek cluster CA ({dir_.name})")
    (sec / "ca.pem").write_bytes(ca.certificate_pem)
    for i in range(1, brokers + 1):
        _write_private(sec / f"broker-{i}.pem", ca.issue(f"broker-{i}").keystore_pem)
    passwords = {user: secrets.token_urlsafe(18) for user in SUPER_USERS}
    credentials = {
        user: scram_credential(SCRAM_MECHANISM, pw, SCRAM_ITERATIONS).to_config()
        for user, pw in passwords.items()
    }
    _write_private(sec / USERS_FILE, json.dumps(credentials).encode())
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{_jaas_value(passwords["broker"])}";'
    )
    _write_private(
        sec / SECRETS_FILE,
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}\n".encode(),
    )
    # the addresses are added once the brokers listen (the supervisor rewrites the file)
    text = client_properties_text("", passwords["admin"], sec / "ca.pem")
    _write_private(dir_ / CLIENT_PROPERTIES, text.encode())
    return passwords["admin"]


def secure_settings(dir_: Path, broker_id: int, port: int, console_port: int) -> dict[str, Any]:
    """The broker settings of ``--security`` (the password comes from the secrets file); the
    console on HTTPS at ``console_port`` (0: a free port)."""
    sec = dir_ / SECURITY_DIR
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(sec / f"broker-{broker_id}.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sec / "ca.pem"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": ";".join(f"User:{u}" for u in SUPER_USERS),
        "http.listeners": f"https://127.0.0.1:{console_port}",
    }


def client_properties_text(bootstrap: str, admin_password: str, ca: Path) -> str:
    """``client.properties``: keys librdkafka and ``--command-config`` both read."""
    return (
        "# odradek cluster up --security: the admin super user over SASL_SSL\n"
        f"bootstrap.servers={bootstrap}\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={SCRAM_MECHANISM}\n"
        "sasl.username=admin\n"
        f"sasl.password={admin_password}\n"
        f"ssl.ca.location={ca}\n"
    )


def _store_credentials(zk_connect: str, credentials: dict[str, str]) -> None:
    """The SCRAM credentials into ``/config/users/<user>`` before any broker starts."""
    from odradek.cluster.zk import KafkaZkClient

    zk = KafkaZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        for user, credential in credentials.items():
            config = zk.get_entity_config("users", user)
            config[SCRAM_MECHANISM] = credential
            zk.set_or_create_entity_config("users", user, config)
    finally:
        zk.close()


# -- the supervisor (python -m odradek.cli.cluster DIR N PORT HTTP_PORT [key=value ...]) -------------------


def _supervise(dir_: Path, n: int, base_port: int, http_port: int, extra: list[str]) -> int:
    from odradek.cluster.zookeeper import ZooKeeperServer
    from odradek.testing.process import BrokerProcess

    secure = "--security" in extra
    sec = dir_ / SECURITY_DIR

    class Broker(BrokerProcess):
        """A broker whose secrets come from a file (``--config``), not its command line."""

        def command(self, parent_fd: int | None = None) -> list[str]:
            cmd = super().command(parent_fd)
            if not secure:
                return cmd
            at = cmd.index("broker") + 1
            return [*cmd[:at], "--config", str(sec / SECRETS_FILE), *cmd[at:]]

    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    zk = ZooKeeperServer(dir_ / "zookeeper", max_session_timeout_ms=60_000)
    zk.start()
    brokers: list[BrokerProcess] = []
    try:
        settings = dict(s.split("=", 1) for s in extra if "=" in s)
        if secure:
            credentials = json.loads((sec / USERS_FILE).read_text())
            _store_credentials(f"{zk.connect_string}/odradek", credentials)
            (sec / USERS_FILE).unlink()
        for i in range(1, n + 1):
            port = 0 if base_port == 0 else base_port + i - 1
            console_port = 0 if http_port == 0 else http_port + i - 1
            b: BrokerProcess = Broker(
                {
                    "broker.id": i,
                    "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                    "http.listeners": f"http://127.0.0.1:{console_port}",
                    "zookeeper.connect": f"{zk.connect_string}/odradek",
                    "zookeeper.session.timeout.ms": 6000,
                    "default.replication.factor": min(3, n),
                    "offsets.topic.replication.factor": min(3, n),
                    "transaction.state.log.replication.factor": min(3, n),
                    "transaction.state.log.min.isr": min(2, n),
                    **(secure_settings(dir_, i, port, console_port) if secure else {}),
                    **settings,
                },
                data_dir=dir_ / f"broker-{i}",
                start_timeout=60,
                log_level="info",
            )
            b.start()
            brokers.append(b)
        bootstrap = ",".join(b.bootstrap_servers for b in brokers)
        properties: dict[str, str] | None = None
        client_file = dir_ / CLIENT_PROPERTIES
        if secure:  # up wrote it without the addresses: they are known now
            properties = read_properties(client_file)
            text = client_properties_text(bootstrap, properties["sasl.password"], sec / "ca.pem")
            _write_private(client_file, text.encode())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stop:
            try:
                if len(metadata(bootstrap, properties=properties).brokers) == n:
                    break
            except ConnectionError:
                pass
            time.sleep(0.2)
        consoles = {
            b.node_id: (b.console_url() if b.settings.get("http.listeners") else "")
            for b in brokers
        }
        state = {
            "pid": os.getpid(),
            "ready": True,
            "zookeeper": zk.connect_string,
            "bootstrap_servers": bootstrap,
            "security": secure,
            "client_properties": str(client_file) if secure else "",
            "brokers": [
                {
                    "id": b.node_id,
                    "port": b.port,
                    "pid": b.pid,
                    "log": str(b.log_path),
                    "console": consoles[b.node_id],
                }
                for b in brokers
            ],
        }
        (dir_ / STATE_FILE).write_text(json.dumps(state, indent=1))
        exited: set[int] = set()
        while not stop:
            time.sleep(0.2)
            for b in brokers:
                if not b.running and b.node_id not in exited:
                    exited.add(b.node_id)
                    print(f"broker {b.node_id} exited; see {b.log_path}", flush=True)
    finally:
        for b in reversed(brokers):
            b.stop(timeout=60)
        zk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(
        _supervise(
            Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
        )
    )

"""TLS listeners: PEM and PKCS12 key stores, inline PEM, ssl.client.auth=requested, TLS
versions and cipher suites, a renewed certificate picked up without a restart, and Kafka's
principal mapping rules."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.broker.config import ConfigError
from odradek.security.tls import PrincipalMapper, SslConfigError, SslSettings, server_context
from odradek.testing.embedded import EmbeddedBroker

from .conftest import Certs, listener_port, make_certs, server_tls


def _api_versions(port: int, ctx: ssl.SSLContext) -> tuple[int, bytes]:
    """(correlation id of the ApiVersions answer, the server's certificate DER)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        header = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
        s.sendall(struct.pack(">i", len(header)) + header)
        answer = s.recv(8)
        der = s.getpeercert(binary_form=True)
        assert der is not None
        return struct.unpack(">ii", answer)[1], der


def _pkcs12(path: Path, cert: trustme.LeafCert, password: bytes) -> None:
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    leaf = x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes())
    data = pkcs12.serialize_key_and_certificates(
        b"server",
        key,
        leaf,
        None,
        serialization.BestAvailableEncryption(password),  # type: ignore[arg-type]
    )
    path.write_bytes(data)


def test_pkcs12_and_inline_pem_key_stores(certs: Certs, tmp_path: Path) -> None:
    client = ssl.create_default_context(cafile=str(certs.ca_pem))
    store = tmp_path / "server.p12"
    _pkcs12(store, certs.ca.issue_cert("127.0.0.1"), b"store-pw")
    for settings in (
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(store),
            "ssl.keystore.password": "store-pw",
        },
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": certs.server_key.read_text(),
            "ssl.keystore.certificate.chain": certs.server_chain.read_text(),
        },
    ):
        with EmbeddedBroker(
            {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **settings}
        ) as b:
            assert _api_versions(listener_port(b, "SSL"), client)[0] == 7


def test_bad_key_store_fails_the_start_naming_the_listener(certs: Certs, tmp_path: Path) -> None:
    for settings in (
        {},  # no key store at all
        {"ssl.keystore.type": "JKS", "ssl.keystore.location": str(certs.server_keystore)},
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "missing.pem")},
    ):
        with pytest.raises(ConfigError, match="listener SSL"):
            EmbeddedBroker({"listeners": "SSL://127.0.0.1:0", **settings}).start()


def test_client_auth_requested_without_certificate_is_anonymous(certs: Certs) -> None:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **server_tls(certs),
        "ssl.client.auth": "requested",
    }
    with EmbeddedBroker(settings) as b:
        client = ssl.create_default_context(cafile=str(certs.ca_pem))
        assert _ssl_principals_while_connected(b, client) == {"User:ANONYMOUS"}
        with_cert = ssl.create_default_context(cafile=str(certs.ca_pem))
        with_cert.load_cert_chain(str(certs.client_chain), str(certs.client_key))
        # the default rule: the full DN, last RDN first (X500Principal.getName())
        assert _ssl_principals_while_connected(b, with_cert) == {"User:CN=alice,OU=eng,O=Acme"}


def _ssl_principals_while_connected(b: EmbeddedBroker, context: ssl.SSLContext) -> set[str]:
    """The principals of ``b``'s SSL connections while one made with ``context`` is open and
    has had an answer (ApiVersions v0)."""
    raw = socket.create_connection(("127.0.0.1", listener_port(b, "SSL")), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(struct.pack(">i", 11) + struct.pack(">hhih", 18, 0, 1, 1) + b"t")
        assert s.recv(8)
        principals: set[str] = b.call(
            lambda: {
                str(c.principal) for c in b.broker.listener.connections() if c.listener_name == "SSL"
            }
        )
        return principals


def test_enabled_protocols_and_cipher_suites(certs: Certs) -> None:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **server_tls(certs, truststore=False),
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    }
    with EmbeddedBroker(settings) as b:
        tls13_only = ssl.create_default_context(cafile=str(certs.ca_pem))
        tls13_only.minimum_version = ssl.TLSVersion.TLSv1_3
        with pytest.raises(ssl.SSLError):
            _api_versions(listener_port(b, "SSL"), tls13_only)
        client = ssl.create_default_context(cafile=str(certs.ca_pem))
        raw = socket.create_connection(("127.0.0.1", listener_port(b, "SSL")), timeout=10)
        with client.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            assert s.version() == "TLSv1.2"
            cipher = s.cipher()
            assert (
                cipher is not None and cipher[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
            )  # trustme makes ECDSA keys


def test_renewed_certificate_is_served_without_restart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = make_certs(tmp_path / "a")
    second = make_certs(tmp_path / "b")  # another CA
    keystore = tmp_path / "live-keystore.pem"
    keystore.write_bytes(first.server_keystore.read_bytes())
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    with EmbeddedBroker(settings) as b:
        trusts_first = ssl.create_default_context(cafile=str(first.ca_pem))
        trusts_second = ssl.create_default_context(cafile=str(second.ca_pem))
        assert _api_versions(listener_port(b, "SSL"), trusts_first)[0] == 7
        tmp = keystore.with_suffix(".tmp")
        tmp.write_bytes(second.server_keystore.read_bytes())
        os.replace(tmp, keystore)  # how certificate renewers install a new file
        deadline = time.monotonic() + 10
        while True:  # the files are checked at most once a second, on a handshake
            try:
                assert _api_versions(listener_port(b, "SSL"), trusts_second)[0] == 7
                break
            except ssl.SSLError:
                assert time.monotonic() < deadline, "the renewed certificate was not served"
                time.sleep(0.2)
        with pytest.raises(ssl.SSLError):
            _api_versions(listener_port(b, "SSL"), trusts_first)


def test_principal_mapping_rules() -> None:
    dn = "CN=kafka1,OU=ServiceUsers,O=Acme,C=US"
    assert PrincipalMapper("DEFAULT").name(dn) == dn
    rules = PrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT"
    )
    assert rules.name(dn) == "kafka1"
    assert rules.name("CN=Duke,OU=JavaSoft,O=Sun,L=SC,ST=CA,C=US") == "duke@javasoft"
    assert rules.name("CN=Alice,O=x") == "ALICE"
    assert rules.name("O=nobody") == "O=nobody"
    assert PrincipalMapper("RULE:^CN=a\\/b,(.*)$/$1/").name("CN=a/b,O=c") == "O=c"
    with pytest.raises(ValueError):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=x")
    with pytest.raises(SslConfigError):
        PrincipalMapper("NOPE")


def test_settings_read_per_listener_keys() -> None:
    s = SslSettings.from_lookup({"ssl.client.auth": "required", "ssl.keystore.type": "PEM"}.get)
    assert (s.client_auth, s.keystore_type, s.truststore_type) == ("required", "PEM", "JKS")
    with pytest.raises(SslConfigError):
        server_context(s)

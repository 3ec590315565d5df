"""Certificates for the security tests, made with ``trustme``: one CA, a server certificate
for 127.0.0.1/localhost, a client certificate (CN=alice,OU=eng,O=Acme), each written as PEM
files (key + chain in one file: Kafka's PEM key store) in a temporary directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme


@dataclass
class Certs:
    ca: trustme.CA
    dir: Path
    ca_pem: Path
    server_keystore: Path
    server_key: Path
    server_chain: Path
    client_keystore: Path
    client_key: Path
    client_chain: Path


def make_certs(tmp: Path) -> Certs:
    ca = trustme.CA(organization_name="odradek test CA")
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert(
        "alice@example.com",
        common_name="alice",
        organization_name="Acme",
        organization_unit_name="eng",
    )
    ca_pem = tmp / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    paths = {}
    for who, cert in (("server", server), ("client", client)):
        keystore = tmp / f"{who}-keystore.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
        key = tmp / f"{who}.key"
        cert.private_key_pem.write_to_path(str(key))
        chain = tmp / f"{who}.crt"
        chain.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
        paths[who] = (keystore, key, chain)
    return Certs(ca, tmp, ca_pem, *paths["server"], *paths["client"])


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))

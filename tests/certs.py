"""Certificates for tests, made with ``trustme``: one CA, a server certificate for
127.0.0.1/localhost, a client certificate (CN=alice,OU=eng,O=Acme), each written as PEM files
(key + chain in one file: Kafka's PEM key store) in a given directory; and a broker's ``ssl.*``
settings for them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


def server_tls(certs: Certs, *, truststore: bool = True) -> dict[str, str]:
    """The broker's ``ssl.*`` settings: the server PEM key store and, with ``truststore``,
    the CA as the PEM trust store that client certificates are checked against."""
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_keystore),
    }
    if truststore:
        settings["ssl.truststore.type"] = "PEM"
        settings["ssl.truststore.location"] = str(certs.ca_pem)
    return settings

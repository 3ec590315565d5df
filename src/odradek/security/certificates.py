"""Certificates for trying TLS out: a certificate authority and the broker certificates it
signs, as PEM bytes (no I/O here; ``odradek cluster up --security`` writes them).

* the CA: an EC P-256 key, a self-signed certificate (``CN=<name>``, basicConstraints CA,
  keyCertSign/cRLSign), valid ``days`` days;
* a broker certificate: its own EC P-256 key, ``CN=<common name>``, subjectAltName the DNS
  names and IP addresses given (clients verify the host they connect to against it, as
  librdkafka and Java clients do by default), extendedKeyUsage serverAuth and clientAuth
  (brokers are TLS clients of each other), signed by the CA.

``BrokerCertificate.keystore_pem`` is Kafka's PEM key store (KIP-651, ``ssl.keystore.type=PEM``,
``ssl.keystore.location``): the unencrypted PKCS#8 private key, then the certificate, then the
CA's certificate. ``CertificateAuthority.certificate_pem`` is the PEM trust store for clients
(``ssl.ca.location``, ``ssl.truststore.type=PEM``).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["BrokerCertificate", "CertificateAuthority"]


def _name(common_name: str, organization: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass(frozen=True)
class BrokerCertificate:
    """A key and the certificate the CA issued for it (PEM)."""

    key_pem: bytes
    certificate_pem: bytes
    ca_certificate_pem: bytes

    @property
    def keystore_pem(self) -> bytes:
        """Kafka's PEM key store: the private key, the certificate, the CA's certificate."""
        return self.key_pem + self.certificate_pem + self.ca_certificate_pem


class CertificateAuthority:
    """A new CA (its key lives only in this object) that issues broker certificates."""

    def __init__(
        self,
        name: str = "odradek development CA",
        organization: str = "odradek",
        days: int = 365,
        now: datetime.datetime | None = None,
    ) -> None:
        self.organization = organization
        self.days = days
        self._now = now or datetime.datetime.now(datetime.UTC)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name, organization)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now - datetime.timedelta(minutes=5))
            .not_valid_after(self._now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        dns_names: Sequence[str] = ("localhost",),
        ip_addresses: Sequence[str] = ("127.0.0.1",),
    ) -> BrokerCertificate:
        """A certificate for ``common_name`` valid for the names and addresses given."""
        key = ec.generate_private_key(ec.SECP256R1())
        alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, self.organization))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now - datetime.timedelta(minutes=5))
            .not_valid_after(self._now + datetime.timedelta(days=self.days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        return BrokerCertificate(
            _key_pem(key),
            certificate.public_bytes(serialization.Encoding.PEM),
            self.certificate_pem,
        )

"""TLS for listeners and the inter-broker client, configured with Kafka's ``ssl.*`` keys, and
the principal of a client certificate (``ssl.principal.mapping.rules``).

Keystores (``ssl.keystore.type``):

* ``PEM`` (KIP-651): ``ssl.keystore.location`` is a file holding the private key (PKCS#8,
  encrypted with ``ssl.key.password`` or not) and the certificate chain; or the same as text in
  ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``;
* ``PKCS12``: ``ssl.keystore.location`` with ``ssl.keystore.password`` (read with
  ``cryptography``). JKS is Java's own format and is refused.

Truststores (``ssl.truststore.type``): ``PEM`` (``ssl.truststore.location`` or inline
``ssl.truststore.certificates``) or ``PKCS12`` (certificates of the file).

``ssl.client.auth``: ``none`` | ``requested`` (a certificate is asked for; without one the
client is ``User:ANONYMOUS``) | ``required``. ``ssl.enabled.protocols`` bounds the TLS versions
(TLSv1.2, TLSv1.3); ``ssl.cipher.suites`` takes IANA names (Kafka's, e.g.
``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``) or OpenSSL's, and applies to TLS 1.2 (OpenSSL
does not let Python choose TLS 1.3 suites).

A ``ServerTls`` rebuilds its context when a key, certificate or truststore file changes: every
handshake's ClientHello (the SNI callback, called for each handshake) checks the files' mtimes
at most once a second and switches the handshake to the newest context, so a renewed
certificate is used without a restart and established connections are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PrincipalMapper",
    "ServerTls",
    "SslConfigError",
    "SslSettings",
    "client_context",
    "distinguished_name",
]

log = logging.getLogger("odradek.security")


class SslConfigError(ValueError):
    """An ``ssl.*`` setting that cannot be used; names the key."""


@dataclass(frozen=True)
class SslSettings:
    """The ``ssl.*`` values of one listener (or of the inter-broker client)."""

    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_key: str | None = None
    keystore_certificate_chain: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: str = "TLSv1.2,TLSv1.3"
    cipher_suites: str = ""
    principal_mapping_rules: str = "DEFAULT"
    endpoint_identification_algorithm: str = "https"

    @classmethod
    def from_lookup(cls, get: Callable[[str], str | None]) -> SslSettings:
        """``get("ssl.keystore.type")`` etc. -> settings (None: Kafka's default)."""
        values: dict[str, str] = {}
        for name in cls.__dataclass_fields__:
            raw = get("ssl." + name.replace("_", "."))
            if raw is not None:
                values[name] = raw
        return cls(**values)

    def files(self) -> list[Path]:
        """The files the context is built from (watched for changes)."""
        return [Path(p) for p in (self.keystore_location, self.truststore_location) if p]


_TLS_VERSIONS = {
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1": ssl.TLSVersion.TLSv1,
}


def _openssl_cipher(name: str) -> str | None:
    """Kafka's IANA cipher suite name -> OpenSSL's (None for a TLS 1.3 suite)."""
    name = name.strip()
    if not name.startswith("TLS_"):
        return name  # already OpenSSL's spelling
    body = name[4:]
    if "_WITH_" not in body:
        return None  # TLS 1.3 suites (TLS_AES_128_GCM_SHA256): always on
    kx, cipher = body.split("_WITH_", 1)
    kx = kx.replace("_", "-")
    kx = {"RSA": "", "ECDHE-RSA": "ECDHE-RSA", "ECDHE-ECDSA": "ECDHE-ECDSA"}.get(kx, kx)
    cipher = re.sub(r"AES_(\d+)", r"AES\1", cipher)
    cipher = cipher.replace("CHACHA20_POLY1305", "CHACHA20-POLY1305")
    cipher = cipher.replace("_", "-")
    if cipher.endswith("-SHA"):
        pass
    return f"{kx}-{cipher}" if kx else cipher


@contextlib.contextmanager
def _private_files(*contents: bytes) -> Iterator[list[str]]:
    """Write ``contents`` to 0600 files in a private temporary directory, removed on exit
    (``ssl`` loads keys and certificates from files only)."""
    with tempfile.TemporaryDirectory(prefix="odradek-tls-") as tmp:
        paths = []
        for i, data in enumerate(contents):
            path = os.path.join(tmp, f"f{i}.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            paths.append(path)
        yield paths


def _pkcs12(path: str, password: str | None) -> tuple[bytes | None, bytes]:
    """(private key PEM or None, certificates PEM) of a PKCS12 file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = Path(path).read_bytes()
    store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    key_pem = None
    if store.key is not None:
        key_pem = store.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    certs = []
    if store.cert is not None:
        certs.append(store.cert.certificate)
    certs.extend(c.certificate for c in store.additional_certs)
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return key_pem, chain


def _load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> bool:
    """Load the key and chain into ``ctx``; False when no keystore is configured."""
    ktype = s.keystore_type.upper()
    if s.keystore_key or s.keystore_certificate_chain:
        if ktype != "PEM":
            raise SslConfigError("ssl.keystore.key needs ssl.keystore.type=PEM")
        if not (s.keystore_key and s.keystore_certificate_chain):
            raise SslConfigError("ssl.keystore.key and ssl.keystore.certificate.chain go together")
        with _private_files(s.keystore_certificate_chain.encode(), s.keystore_key.encode()) as (
            chain,
            key,
        ):
            ctx.load_cert_chain(chain, key, password=s.key_password)
        return True
    if not s.keystore_location:
        return False
    if ktype == "PEM":
        ctx.load_cert_chain(s.keystore_location, password=s.key_password)
    elif ktype == "PKCS12":
        key_pem, chain_pem = _pkcs12(s.keystore_location, s.keystore_password)
        if key_pem is None:
            raise SslConfigError(f"ssl.keystore.location: no private key in {s.keystore_location}")
        with _private_files(chain_pem, key_pem) as (chain, key):
            ctx.load_cert_chain(chain, key)
    else:
        raise SslConfigError(
            f"ssl.keystore.type: {s.keystore_type} is not supported (use PEM or PKCS12)"
        )
    return True


def _load_truststore(ctx: ssl.SSLContext, s: SslSettings) -> bool:
    ttype = s.truststore_type.upper()
    if s.truststore_certificates:
        if ttype != "PEM":
            raise SslConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
        ctx.load_verify_locations(cadata=s.truststore_certificates)
        return True
    if not s.truststore_location:
        return False
    if ttype == "PEM":
        ctx.load_verify_locations(cafile=s.truststore_location)
    elif ttype == "PKCS12":
        _key, certs = _pkcs12(s.truststore_location, s.truststore_password)
        ctx.load_verify_locations(cadata=certs.decode())
    else:
        raise SslConfigError(
            f"ssl.truststore.type: {s.truststore_type} is not supported (use PEM or PKCS12)"
        )
    return True


def _protocols(ctx: ssl.SSLContext, s: SslSettings) -> None:
    versions = []
    for name in s.enabled_protocols.split(","):
        name = name.strip()
        if not name:
            continue
        v = _TLS_VERSIONS.get(name.upper())
        if v is None:
            raise SslConfigError(f"ssl.enabled.protocols: unknown protocol {name!r}")
        versions.append(v)
    if versions:
        ctx.minimum_version = min(versions)
        ctx.maximum_version = max(versions)
    if s.cipher_suites.strip():
        names = [c for c in (_openssl_cipher(n) for n in s.cipher_suites.split(",")) if c]
        if names:
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError as exc:
                raise SslConfigError(f"ssl.cipher.suites: {exc}") from None


def server_context(s: SslSettings) -> ssl.SSLContext:
    """A server-side context for ``s`` (raises SslConfigError)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        if not _load_keystore(ctx, s):
            raise SslConfigError(
                "an SSL listener needs ssl.keystore.location (or ssl.keystore.key)"
            )
        auth = s.client_auth.strip().lower()
        if auth not in ("none", "requested", "required"):
            raise SslConfigError(f"ssl.client.auth: {s.client_auth!r} (none, requested, required)")
        has_trust = _load_truststore(ctx, s)
        if auth != "none":
            if not has_trust:
                ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
            ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
        _protocols(ctx, s)
    except (ssl.SSLError, OSError) as exc:
        raise SslConfigError(f"ssl: {exc}") from None
    return ctx


def client_context(s: SslSettings) -> ssl.SSLContext:
    """A client-side context (the inter-broker client): verifies the server against the
    truststore; the host name only when ``ssl.endpoint.identification.algorithm=https``;
    presents the keystore's certificate when there is one."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        _load_keystore(ctx, s)
        if not _load_truststore(ctx, s):
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        ctx.check_hostname = s.endpoint_identification_algorithm.strip().lower() == "https"
        _protocols(ctx, s)
    except (ssl.SSLError, OSError) as exc:
        raise SslConfigError(f"ssl: {exc}") from None
    return ctx


class ServerTls:
    """A listener's TLS: ``context`` is handed to the socket server once; each handshake uses
    the newest context built from the files (see the module docstring)."""

    RECHECK_S = 1.0

    def __init__(
        self, settings: SslSettings, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._current = server_context(settings)
        self._stamps = self._mtimes()
        self._checked = monotonic()
        self.context = server_context(settings)
        self.context.sni_callback = self._on_client_hello
        self.on_handshake_failure: Callable[[str], None] | None = None
        """Told the reason of every failed handshake (plaintext or garbage on the port, an
        unknown CA, a protocol mismatch); the client's address is not known at this layer."""
        self.context.sslobject_class = _failure_reporting_class(self)
        self.reloads = 0
        self.mapper = PrincipalMapper(settings.principal_mapping_rules)

    def _mtimes(self) -> tuple[float, ...]:
        out = []
        for p in self.settings.files():
            try:
                out.append(p.stat().st_mtime_ns)
            except OSError:
                out.append(-1)
        return tuple(out)

    def maybe_reload(self, force: bool = False) -> None:
        now = self._monotonic()
        if not force and now - self._checked < self.RECHECK_S:
            return
        self._checked = now
        stamps = self._mtimes()
        if stamps == self._stamps and not force:
            return
        try:
            fresh = server_context(self.settings)
        except SslConfigError as exc:  # half-written files: keep serving the old ones
            log.warning("TLS files changed but cannot be loaded yet: %s", exc)
            return
        with self._lock:
            self._current, self._stamps = fresh, stamps
            self.reloads += 1
        log.info(
            "TLS key store / trust store reloaded from %s", [str(p) for p in self.settings.files()]
        )

    def _on_client_hello(
        self, sslobj: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        self.maybe_reload()
        sslobj.context = self._current


def _failure_reporting_class(tls: ServerTls) -> type[ssl.SSLObject]:
    """An SSLObject whose failed handshakes are reported to ``tls.on_handshake_failure``
    (asyncio closes such connections without telling the protocol anything)."""

    class _ReportingSSLObject(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise
            except ssl.SSLError as exc:
                report = tls.on_handshake_failure
                if report is not None:
                    report(str(exc.reason or exc))
                raise

    return _ReportingSSLObject


# -- principals -------------------------------------------------------------------------------

_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def distinguished_name(der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` (RFC 2253: last
    RDN first, ``CN=client,OU=eng,O=Acme,C=US``), which is Kafka's default principal name."""
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    return cert.subject.rfc4514_string()


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return out.lower()
        if self.case == "U":
            return out.upper()
        return out


class PrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: ``ssl.principal.mapping.rules`` is a comma-separated list
    of ``DEFAULT`` (the DN unchanged) and ``RULE:<regex>/<replacement>/[L|U]`` (``$1`` refers to
    a group; the regex must match the whole DN). The first rule that matches gives the name;
    none matching is an error (Kafka's NoMatchingRule: the handshake's principal fails)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise SslConfigError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
            pos = m.end()
            if m.group(1):
                self.rules.append(_Rule(None, "", ""))
            else:
                pattern = re.compile(m.group(2).replace("\\/", "/"))
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3).replace("\\/", "/"))
                self.rules.append(_Rule(pattern, replacement, m.group(4)))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise ValueError(f"No rules apply to {dn}, rules {self.rules}")

"""The broker's security keys (listeners' protocols, TLS, SASL), Kafka's names and defaults.

Every ``ssl.*`` and ``sasl.*`` key below may also be given per listener as
``listener.name.<listener name, lower case>.<key>`` (and the JAAS config per mechanism,
``listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config``), which wins over the
plain key for that listener: ``BrokerConfig`` accepts any ``listener.name.`` key and keeps it
as given (``explicit()``); ``odradek.broker.endpoints`` reads them.
"""

from __future__ import annotations

from odradek.broker.config.values import _enum, _int, _str

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LISTENER_PREFIX = "listener.name."

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def _protocol_map(text: str) -> str:
    parse_protocol_map(text)
    return text.strip()


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; raises ValueError."""
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"invalid entry {item!r}: expected NAME:PROTOCOL with PROTOCOL one of "
                + ", ".join(SECURITY_PROTOCOLS)
            )
        out[name] = protocol
    return out


def _mechanisms(text: str) -> str:
    return ",".join(m.strip() for m in text.split(",") if m.strip())


SECURITY_KEY_SPECS = [
    # (name, parser, default, meaning)
    (
        "listener.security.protocol.map",
        _protocol_map,
        DEFAULT_PROTOCOL_MAP,
        "Listener name -> security protocol (NAME:PROTOCOL,...).",
    ),
    (
        "inter.broker.listener.name",
        _str,
        None,
        "The listener brokers use to reach each other (default: from security.inter.broker.protocol).",
    ),
    (
        "security.inter.broker.protocol",
        _enum(*SECURITY_PROTOCOLS),
        "PLAINTEXT",
        "Security protocol between brokers when inter.broker.listener.name is unset.",
    ),
    (
        "sasl.enabled.mechanisms",
        _mechanisms,
        "GSSAPI",
        "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI is not).",
    ),
    (
        "sasl.mechanism.inter.broker.protocol",
        _str,
        "GSSAPI",
        "The SASL mechanism brokers authenticate to each other with.",
    ),
    (
        "sasl.jaas.config",
        _str,
        None,
        "JAAS login module entry (prefer listener.name.<l>.<mechanism>.sasl.jaas.config).",
    ),
    (
        "sasl.server.max.receive.size",
        _int(1, _INT_MAX),
        524288,
        "Largest SASL token (or request before authentication) accepted.",
    ),
    (
        "connections.max.reauth.ms",
        _int(0, _LONG_MAX),
        0,
        "Session lifetime of a SASL connection (KIP-368); 0: sessions do not expire.",
    ),
    (
        "sasl.oauthbearer.jwks.endpoint.url",
        _str,
        None,
        "OAUTHBEARER: validate signed JWTs against this JWKS (file:// or http(s)://).",
    ),
    (
        "sasl.oauthbearer.expected.audience",
        _str,
        "",
        "OAUTHBEARER: accepted aud values (comma-separated); empty: not checked.",
    ),
    ("sasl.oauthbearer.expected.issuer", _str, None, "OAUTHBEARER: the required iss."),
    (
        "sasl.oauthbearer.clock.skew.seconds",
        _int(0, _INT_MAX),
        30,
        "OAUTHBEARER: leeway for exp and nbf.",
    ),
    ("sasl.oauthbearer.sub.claim.name", _str, "sub", "OAUTHBEARER: the principal's claim."),
    ("sasl.oauthbearer.scope.claim.name", _str, "scope", "OAUTHBEARER: the scope claim."),
    (
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        _int(0, _LONG_MAX),
        3600000,
        "Accepted; the JWKS is read again when a token names an unknown key.",
    ),
    ("ssl.keystore.type", _str, "JKS", "PEM or PKCS12 (JKS is not supported)."),
    ("ssl.keystore.location", _str, None, "Key store file (PEM: key and certificate chain)."),
    ("ssl.keystore.password", _str, None, "Password of a PKCS12 key store."),
    ("ssl.key.password", _str, None, "Password of the (encrypted) private key."),
    ("ssl.keystore.key", _str, None, "PEM private key given inline (ssl.keystore.type=PEM)."),
    ("ssl.keystore.certificate.chain", _str, None, "PEM certificate chain given inline."),
    ("ssl.truststore.type", _str, "JKS", "PEM or PKCS12 (JKS is not supported)."),
    ("ssl.truststore.location", _str, None, "Trust store file: CA certificates."),
    ("ssl.truststore.password", _str, None, "Password of a PKCS12 trust store."),
    ("ssl.truststore.certificates", _str, None, "PEM CA certificates given inline."),
    (
        "ssl.client.auth",
        _enum("none", "requested", "required"),
        "none",
        "Ask SSL clients for a certificate: none, requested, required.",
    ),
    ("ssl.enabled.protocols", _str, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    ("ssl.protocol", _str, "TLSv1.3", "Accepted for compatibility; ssl.enabled.protocols decides."),
    (
        "ssl.cipher.suites",
        _str,
        "",
        "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's.",
    ),
    (
        "ssl.principal.mapping.rules",
        _str,
        "DEFAULT",
        "Certificate DN -> principal name: DEFAULT, RULE:regex/replacement/[LU].",
    ),
    (
        "ssl.endpoint.identification.algorithm",
        _str,
        "https",
        "The inter-broker client checks the host name (https) or not (empty).",
    ),
]

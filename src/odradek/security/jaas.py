"""Kafka's JAAS configuration strings, as in ``sasl.jaas.config``::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="pw";

``parse_jaas`` returns (login module class, control flag, options); values are quoted
(``"..."`` with backslash escapes) or bare words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasConfigError", "JaasEntry", "parse_jaas"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<eq>=)|(?P<semi>;)|(?P<word>[^\s="; ]+))'
)


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that does not parse."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasConfigError(f"cannot parse JAAS config at {text[pos : pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None
        value = m.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out.append((kind, value))
    return out


def parse_jaas(text: str) -> JaasEntry:
    """Parse one login module entry (Kafka allows exactly one in ``sasl.jaas.config``)."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasConfigError("expected '<LoginModule> <flag> [key=value ...];'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise JaasConfigError(f"invalid control flag {tokens[1][1]!r}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != "semi":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "eq":
            raise JaasConfigError("expected key=value in JAAS config")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasConfigError("JAAS config must end with ';'")
    if i + 1 != len(tokens):
        raise JaasConfigError("only one login module is allowed in sasl.jaas.config")
    return JaasEntry(module, flag, options)

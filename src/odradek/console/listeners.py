"""``http.listeners`` (and ``schema.registry.listeners``): where the HTTP servers listen.

A comma-separated list of ``http://host:port`` or ``https://host:port`` (an IPv6 host in
brackets); empty turns the listener off; port 0 picks a free port. ``https`` serves TLS with the
broker's ``ssl.*`` key store. Parsed here, with no other import, so that the broker's config
validates the key without loading the console.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["HttpEndpoint", "parse_http_endpoints", "parse_http_listeners"]

_HTTP_RE = re.compile(r"^(https?)://(\[[^\]]*\]|[^:/]*):(\d+)/?$", re.IGNORECASE)


class HttpEndpoint(NamedTuple):
    """One entry: ``scheme`` is ``http`` or ``https`` (lower case)."""

    scheme: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


def parse_http_endpoints(text: str) -> list[HttpEndpoint]:
    """``"https://127.0.0.1:9644,http://[::1]:9645"`` -> [HttpEndpoint]; "" -> [];
    ValueError when an entry is malformed."""
    out: list[HttpEndpoint] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        m = _HTTP_RE.match(item)
        if m is None:
            raise ValueError(f"expected http://host:port or https://host:port, got {item!r}")
        port = int(m.group(3))
        if port > 65535:
            raise ValueError(f"port out of range in {item!r}")
        out.append(HttpEndpoint(m.group(1).lower(), m.group(2).strip("[]"), port))
    return out


def parse_http_listeners(text: str) -> list[tuple[str, int]]:
    """``"http://127.0.0.1:9644,http://[::1]:9645"`` -> [(host, port)]; "" -> []."""
    return [(e.host, e.port) for e in parse_http_endpoints(text)]


def http_url(scheme: str, host: str, port: int) -> str:
    """``scheme://host:port`` with an IPv6 host in brackets."""
    return f"{scheme}://{host if ':' not in host else f'[{host}]'}:{port}"

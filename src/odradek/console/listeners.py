"""``http.listeners``: where the console, /metrics and /health listen.

A comma-separated list of ``http://host:port`` (an IPv6 host in brackets); empty turns the
listener off; port 0 picks a free port. Parsed here, with no other import, so that the broker's
config validates the key without loading the console.
"""

from __future__ import annotations

import re

__all__ = ["parse_http_listeners"]

_HTTP_RE = re.compile(r"^http://(\[[^\]]*\]|[^:/]*):(\d+)/?$")


def parse_http_listeners(text: str) -> list[tuple[str, int]]:
    """``"http://127.0.0.1:9644,http://[::1]:9645"`` -> [(host, port)]; "" -> []."""
    out: list[tuple[str, int]] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        m = _HTTP_RE.match(item)
        if m is None:
            raise ValueError(f"expected http://host:port, got {item!r}")
        port = int(m.group(2))
        if port > 65535:
            raise ValueError(f"port out of range in {item!r}")
        out.append((m.group(1).strip("[]"), port))
    return out

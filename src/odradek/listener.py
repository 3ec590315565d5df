"""Closing an asyncio listening socket without orphaning the connections it has just accepted.

Shared by every server in the package that listens with ``asyncio`` (the broker's Kafka
listener, the console's HTTP listener): each of them stops accepting with ``close_listener``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["close_listener"]


async def close_listener(server: Any) -> None:
    """Stop accepting, let the connections already accepted get their transport, then close.

    On selector event loops asyncio accepts in the listener's callback and builds each
    connection's transport in a task that runs one loop turn later. ``Server.close()`` in
    between makes that task fail (``Server._attach`` asserts the server is open; the error is
    swallowed) and leaves the accepted socket in a half-built transport that refers to itself:
    only the cyclic garbage collector closes it, so its client sees no EOF for as long as no
    collection runs. Hence: remove the listener's reader (no new accept callback runs), give the
    tasks of the accepts already made the one turn they need (their ``connection_made`` then
    sees the server stopping and closes them, or they join the server's connections that the
    caller closes next), and only then close the server.

    The reader is removed before this coroutine first suspends: a caller that awaits it first
    thing is sure that no accept callback runs after its own turn."""
    loop = asyncio.get_running_loop()
    try:
        for sock in getattr(server, "sockets", ()):
            # not every loop has readers (proactor) or serves through them (uvloop: no-op)
            with contextlib.suppress(NotImplementedError, ValueError, OSError):
                loop.remove_reader(sock.fileno())
        await asyncio.sleep(0)
    finally:
        server.close()

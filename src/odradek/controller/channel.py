"""The controller's requests to the brokers (Kafka's ``ControllerChannelManager`` /
``RequestSendThread``), on the broker's asyncio loop through the inter-broker client.

The controller decides on its own event thread (``controller.Controller``: blocking
ZooKeeper calls, one event at a time) and hands requests over with :meth:`update_brokers` and
:meth:`send`, which never block: each is scheduled on the channel's loop with
``call_soon_threadsafe``, so the loop sees them in exactly the order the event thread made the
calls (``update_brokers`` before the requests to a new broker, each broker's requests in the
order decided).

Per live broker, one asyncio task sends that broker's requests in order, one at a time, on the
(broker id, ``controller``) connection of the :class:`InterBrokerClient` (client id
``controller-<id>``): LeaderAndIsr, UpdateMetadata or StopReplica at the highest version both
sides speak (Kafka 3.9's newest: v7, v8, v4), then waits for the answer (at most
``request_timeout_ms``). A request that fails (the connection breaks, the answer is late) is
sent again, after 50 ms doubling up to 1 s, until it is answered or the broker leaves
(``update_brokers`` without it, or with another address or epoch: its queue is dropped and the
task stops). Answers go to ``on_response(broker_id, request, response)`` on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from odradek.cluster.znodes import BrokerInfo
from odradek.controller.decisions import BrokerRequest
from odradek.protocol.network_client import InterBrokerRequestError, Node

__all__ = ["ControllerChannelManager", "InterBrokerSender"]

log = logging.getLogger(__name__)

ResponseCallback = Callable[[int, BrokerRequest, Any], None]


class InterBrokerSender(Protocol):
    """What the channel needs of ``odradek.broker.inter_broker_client.InterBrokerClient``
    (handed in: the controller does not import the broker package)."""

    async def send(
        self,
        node: Node,
        purpose: str,
        request: Any,
        *,
        timeout_ms: int | None = None,
        client_id: str | None = None,
    ) -> Any: ...

    def close_connection(self, broker_id: int, purpose: str | None = None) -> None: ...


PURPOSE = "controller"
_BACKOFF_S = 0.05
_BACKOFF_MAX_S = 1.0


class _RequestSender:
    """One broker's queue and the task that sends it (Kafka's ``RequestSendThread``)."""

    def __init__(self, channel: ControllerChannelManager, broker: BrokerInfo) -> None:
        self.channel = channel
        self.broker = broker
        self.node = Node(broker.id, broker.host, broker.port)
        self.queue: asyncio.Queue[BrokerRequest] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-to-broker-{broker.id}"
        )

    async def _run(self) -> None:
        channel = self.channel
        while True:
            request = await self.queue.get()
            backoff = _BACKOFF_S
            while True:
                try:
                    response = await channel.client.send(
                        self.node,
                        PURPOSE,
                        request,
                        timeout_ms=channel.request_timeout_ms,
                        client_id=channel.client_id,
                    )
                except InterBrokerRequestError as exc:
                    log.info("controller -> broker %d: %s; retrying", self.broker.id, exc)
                    await asyncio.sleep(backoff)
                    backoff = min(_BACKOFF_MAX_S, backoff * 2)
                    continue
                if channel.on_response is not None:
                    try:
                        channel.on_response(self.broker.id, request, response)
                    except Exception:
                        log.exception("controller response callback failed")
                break

    def stop(self) -> None:
        self.task.cancel()


class ControllerChannelManager:
    """A :class:`~odradek.controller.controller.ControllerChannel` over the inter-broker
    client, running on ``loop`` (see the module docstring). ``update_brokers`` and ``send``
    may be called from any thread."""

    def __init__(
        self,
        client: InterBrokerSender,
        loop: asyncio.AbstractEventLoop,
        controller_id: int,
        *,
        on_response: ResponseCallback | None = None,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.client = client
        self.loop = loop
        self.client_id = f"controller-{controller_id}"
        self.on_response = on_response
        self.request_timeout_ms = request_timeout_ms
        self._senders: dict[int, _RequestSender] = {}
        self._closed = False

    # -- from the controller's event thread ----------------------------------------------------

    def update_brokers(self, live: Mapping[int, BrokerInfo]) -> None:
        self._schedule(self._update_brokers, dict(live))

    def send(self, broker_id: int, request: BrokerRequest) -> None:
        self._schedule(self._send, broker_id, request)

    def _schedule(self, fn: Callable[..., None], *args: Any) -> None:
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the broker has stopped
            self.loop.call_soon_threadsafe(fn, *args)

    # -- on the loop ---------------------------------------------------------------------------

    def _update_brokers(self, live: dict[int, BrokerInfo]) -> None:
        if self._closed:
            return
        for broker_id in list(self._senders):
            sender = self._senders[broker_id]
            info = live.get(broker_id)
            if info is None or (info.host, info.port, info.epoch) != (
                sender.broker.host,
                sender.broker.port,
                sender.broker.epoch,
            ):
                sender.stop()
                del self._senders[broker_id]
                self.client.close_connection(broker_id, PURPOSE)
        for broker_id, info in live.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = _RequestSender(self, info)

    def _send(self, broker_id: int, request: BrokerRequest) -> None:
        sender = self._senders.get(broker_id)
        if sender is None or self._closed:
            log.debug("no sender for broker %d: request dropped", broker_id)
            return
        sender.queue.put_nowait(request)

    async def close(self) -> None:
        """Stop every sender (on the loop); requests not yet answered are dropped."""
        self._closed = True
        senders = list(self._senders.values())
        self._senders.clear()
        for s in senders:
            s.stop()
        for s in senders:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await s.task
        for s in senders:
            self.client.close_connection(s.broker.id, PURPOSE)

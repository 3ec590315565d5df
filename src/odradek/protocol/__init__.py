"""odradek.protocol: Kafka's wire protocol without I/O (bytes in, typed values out).

Modules (each with an explicit ``__all__``; nothing is re-exported here, so importing one
does not import kio unless it needs it):

* ``records``: RecordBatch v2 view, record iteration, builder, CRC-32C, codecs
* ``errors``: ErrorCode (kio's) and the ProtocolError hierarchy
* ``framing``: FrameDecoder (int32 size prefix, max frame size)
* ``headers``: request header v0-v2, response header v0-v1
* ``messages``: kio-backed decode_request / encode_response / encode_request / decode_response
* ``produce_response``, ``fetch_response``: hand-written encoders for the hot responses

Never imports asyncio or socket.
"""

__all__: list[str] = []

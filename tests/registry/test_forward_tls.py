"""A write forwarded to an ``https`` writer: over TLS verified with the broker's truststore,
carrying the client's ``Authorization`` header (the writer checks it again)."""

from __future__ import annotations

import asyncio
import ssl

import pytest
from tests.certs import Certs, make_certs

from odradek.console.http import HttpServer, Request, Response
from odradek.registry.forward import forward


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_forward_over_tls_with_the_authorization_header(certs: Certs) -> None:
    seen: list[Request] = []

    async def handler(req: Request) -> Response:
        seen.append(req)
        return Response(200, b'{"id":1}', "application/vnd.schemaregistry.v1+json")

    async def main() -> None:
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(str(certs.server_keystore))
        server = HttpServer(handler)
        port = await server.start("127.0.0.1", 0, server_ctx)
        client_ctx = ssl.create_default_context(cafile=str(certs.ca_pem))
        try:
            status, ctype, body = await forward(
                f"https://127.0.0.1:{port}",
                "POST",
                "/subjects/s-value/versions",
                b'{"schema":"\\"string\\""}',
                "application/vnd.schemaregistry.v1+json",
                5.0,
                extra_headers=[("authorization", "Basic YWxpY2U6cHc=")],
                ssl_context=client_ctx,
            )
            assert (status, body) == (200, b'{"id":1}')
            assert ctype.startswith("application/vnd.schemaregistry.v1+json")
            # a writer whose certificate the truststore does not know is not sent anything
            with pytest.raises(ssl.SSLCertVerificationError):
                await forward(
                    f"https://127.0.0.1:{port}",
                    "POST",
                    "/subjects/s-value/versions",
                    b"{}",
                    "application/vnd.schemaregistry.v1+json",
                    5.0,
                    extra_headers=[("authorization", "Basic c2VjcmV0")],
                    ssl_context=ssl.create_default_context(),
                )
        finally:
            await server.stop()

    asyncio.run(main())
    assert len(seen) == 1
    assert seen[0].headers["authorization"] == "Basic YWxpY2U6cHc="
    assert seen[0].client == "127.0.0.1"

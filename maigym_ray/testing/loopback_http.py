"""A throwaway HTTP server on loopback, for tests of the clients that call one: an OpenAI-compatible endpoint
(``policy.kind=openai``, the spec writer, LLM synthesis) or a desktop guest agent's health route."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def loopback_http(*routes: web.RouteDef) -> AsyncIterator[int]:
    """Serves aiohttp ``routes`` (``web.post("/v1/completions", handler)``, ...) on 127.0.0.1 at a free port,
    which it yields; the server is gone when the block ends."""
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()

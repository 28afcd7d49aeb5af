"""Serving the API over TLS with uvicorn: blocking (``streamshield serve``) or in a thread.

There is deliberately no plain-HTTP mode: transport encryption is part of the
security model (paper 5, ENCRYPTED TRANSPORT), so a server without a certificate
does not start.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import uvicorn
from starlette.types import ASGIApp

from streamshield.server.tls import TlsFiles


@dataclass
class Running:
    """A server started in a background thread; ``stop`` shuts it down."""

    server: uvicorn.Server
    thread: threading.Thread
    url: str

    def stop(self, timeout: float | None = None) -> None:
        """Stops taking connections; requests in progress get the graceful time, then
        an answer from :mod:`.stop_answers`; waits (bounded) for the thread."""
        self.server.should_exit = True
        graceful = self.server.config.timeout_graceful_shutdown or 0
        self.thread.join(timeout if timeout is not None else max(10.0, graceful + 5.0))


GRACEFUL_SECONDS = 5
"""What a request in progress at ``streamshield serve``'s stop gets to finish (a query
registration or removal waits for Spark, seconds on a loaded machine); after it, 503
server_stopping (:mod:`.stop_answers`). In-process servers (tests, benches) keep
uvicorn's 2 s unless told: their stops should not wait."""
IN_PROCESS_GRACEFUL = 2


def _config(
    app: ASGIApp,
    host: str,
    port: int,
    tls: TlsFiles,
    log_level: str = "warning",
    graceful: int = GRACEFUL_SECONDS,
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        ssl_certfile=str(tls.cert),
        ssl_keyfile=str(tls.key),
        log_level=log_level,
        lifespan="off",
        timeout_graceful_shutdown=graceful,
    )


def serve(app: ASGIApp, host: str, port: int, tls: TlsFiles) -> None:
    """Serves until interrupted."""
    uvicorn.Server(_config(app, host, port, tls)).run()


def serve_in_thread(
    app: ASGIApp,
    host: str,
    port: int,
    tls: TlsFiles,
    startup_timeout: float = 30.0,
    log_level: str = "warning",
    graceful: int = IN_PROCESS_GRACEFUL,
) -> Running:
    """Starts the server in a daemon thread and waits (bounded) until it listens.

    In a thread uvicorn installs no signal handlers: the caller decides what SIGTERM
    means (``streamshield serve``: stop everything cleanly, :mod:`.main`).
    """
    server = uvicorn.Server(_config(app, host, port, tls, log_level, graceful))
    thread = threading.Thread(target=server.run, name="streamshield-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the API server did not start")
        time.sleep(0.05)
    bound = port
    if port == 0 and server.servers:
        bound = server.servers[0].sockets[0].getsockname()[1]
    return Running(server, thread, f"https://{host}:{bound}")

"""A stop while requests are in progress answers them and prints no traceback.

uvicorn gives requests in progress the graceful time, then cancels their tasks; unanswered, each
would leave an ``asyncio.CancelledError`` traceback on stderr and a cut connection
(seen in the crash harness's server logs). Real uvicorn over TLS on loopback, with a
route held in a thread past the graceful time and an endless event stream; no Spark.
"""

from __future__ import annotations

import ssl
import threading

import httpx
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from streamshield.server.runner import serve_in_thread
from streamshield.server.stop_answers import RETRY_AFTER, StopAnswers
from streamshield.server.tls import ensure_self_signed


def _app(slow_in: threading.Event, stream_in: threading.Event, release: threading.Event) -> FastAPI:
    app = FastAPI()

    @app.get("/slow")
    def slow() -> dict:  # a synchronous route: in the thread pool, like a registration
        slow_in.set()
        release.wait(60)
        return {"done": True}

    @app.get("/events")
    async def events() -> StreamingResponse:
        import asyncio

        async def forever():
            yield b"event: hello\ndata: {}\n\n"
            stream_in.set()
            while True:
                await asyncio.sleep(3600)
                yield b": ping\n\n"

        return StreamingResponse(forever(), media_type="text/event-stream")

    return app


def test_a_stop_answers_requests_in_progress_without_a_traceback(tmp_path, capfd) -> None:
    tls = ensure_self_signed(tmp_path / "tls")
    slow_in, stream_in, release = threading.Event(), threading.Event(), threading.Event()
    running = serve_in_thread(
        StopAnswers(_app(slow_in, stream_in, release)), "127.0.0.1", 0, tls, graceful=0.5
    )
    context = ssl.create_default_context(cafile=str(tls.cert))
    got: dict[str, object] = {}

    def slow() -> None:
        with httpx.Client(base_url=running.url, verify=context, timeout=60) as http:
            got["slow"] = http.get("/slow")

    def stream() -> None:
        with (
            httpx.Client(base_url=running.url, verify=context, timeout=60) as http,
            http.stream("GET", "/events") as answer,
        ):
            got["lines"] = list(answer.iter_lines())  # ends when the body ends

    clients = [threading.Thread(target=f, daemon=True) for f in (slow, stream)]
    for client in clients:
        client.start()
    try:
        assert slow_in.wait(30) and stream_in.wait(30)  # both requests are in progress
        running.stop()
    finally:
        release.set()
    for client in clients:
        client.join(30)
    assert not running.thread.is_alive()
    answer = got["slow"]
    assert isinstance(answer, httpx.Response) and answer.status_code == 503
    assert answer.json()["error"] == "server_stopping"
    assert answer.headers["Retry-After"] == str(RETRY_AFTER)
    assert "event: hello" in got["lines"]  # the stream ended cleanly, not cut
    err = capfd.readouterr().err
    assert "Traceback" not in err and "CancelledError" not in err, err

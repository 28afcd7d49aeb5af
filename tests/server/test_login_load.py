"""Fifty logins at once, with the real argon2id parameters, on the real server: every one
is answered, none left to time out; those beyond the login gate's queue get 503
``login_busy`` with a Retry-After at once and get in when they come back then."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from streamshield.catalog.passwords import DEFAULT_HASHER
from streamshield.server.app import create_app
from streamshield.server.runner import serve_in_thread
from streamshield.server.tls import ensure_self_signed
from tests.server.conftest import PASSWORD

pytestmark = pytest.mark.spark

LOGINS = 50
TIMEOUT = 60.0  # the client's: an answer must come well before


def _login(server, url: str | None = None) -> httpx.Response:
    with server.client() as http:
        body = {"user": "al", "password": PASSWORD, "roles": ["CUSTOMER1"]}
        return http.post((url or server.url) + "/login", json=body, timeout=TIMEOUT)


def _at_once(server, url: str | None = None) -> list[httpx.Response | BaseException]:
    start = threading.Barrier(LOGINS)
    answers: list[httpx.Response | BaseException] = [RuntimeError("no answer")] * LOGINS

    def one(i: int) -> None:
        start.wait(30)
        try:
            answers[i] = _login(server, url)
        except Exception as err:  # a timeout is what this test is about: keep it
            answers[i] = err

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(LOGINS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT + 30)
    return answers


def _busy(answer: httpx.Response) -> int:
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "login_busy"
    retry = int(answer.headers["Retry-After"])
    assert 1 <= retry <= 120
    return retry


def test_fifty_simultaneous_logins_are_all_answered(server) -> None:
    assert server.service.security.passwords.hasher is DEFAULT_HASHER  # the real cost
    began = time.monotonic()
    answers = _at_once(server)
    took = time.monotonic() - began
    failed = [a for a in answers if not isinstance(a, httpx.Response)]
    assert not failed, f"{len(failed)} of {LOGINS} logins not answered: {failed[:3]}"
    ok = [a for a in answers if a.status_code == 200]
    busy = [a for a in answers if a.status_code != 200]
    for answer in busy:
        _busy(answer)
    assert ok and all(a.json()["token"] for a in ok)
    assert took < TIMEOUT
    print(f"{len(ok)} in, {len(busy)} told to retry, all answered in {took:.1f} s")
    # Once the queue has drained, those refused come back one by one and get in.
    for _ in busy:
        answer = _login(server)
        assert answer.status_code == 200, answer.text


def test_a_small_queue_refuses_at_once_with_retry_after(server) -> None:
    """A gate of 1 check and 2 waiting (a second API over the same service): most of 50
    simultaneous logins are refused at once, nothing about them is checked or counted."""
    tls = ensure_self_signed(server.cert.parent)
    app = create_app(server.service, login_workers=1, login_waiting=2)
    running = serve_in_thread(app, "127.0.0.1", 0, tls)
    try:
        answers = _at_once(server, running.url)
    finally:
        running.stop()
    assert all(isinstance(a, httpx.Response) for a in answers)
    ok = [a for a in answers if a.status_code == 200]
    busy = [_busy(a) for a in answers if a.status_code != 200]
    assert len(ok) >= 3 and busy  # the gate's three at least; the rest, as they came
    assert len(ok) + len(busy) == LOGINS
    # Refused attempts are not failures: a correct password still gets in at once.
    assert _login(server).status_code == 200

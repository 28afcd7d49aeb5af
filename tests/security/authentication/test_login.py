"""Threats: login used against users (docs/security.md, "Login cannot be used against users").

* Lockout by name: failures counted against a user name alone let anyone who knows the
  name lock its owner out from another address. Failures count per (user, address),
  with a wait that doubles, plus a limit per address for one address trying many names.
* Account probing: an unknown name and a wrong password must fail alike, in message and
  in time (an argon2 verification against a dummy hash for unknown names).
* Session theft outliving the fix: a session ends at logout, at expiry, and when its
  user's password changes; a token only ever acts as the user it was issued to.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from argon2 import PasswordHasher, Type

from streamshield.catalog.administration import WrongPassword
from streamshield.catalog.errors import AuthError, PermissionDenied, Throttled
from streamshield.catalog.oxrbac import SYSTEM, Permission
from streamshield.catalog.security import SecurityCatalog, Session
from streamshield.catalog.throttle import ThrottlePolicy

CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)
AL_PW, JOE_PW = "al-password-123", "joe-password-123"
HER_ADDRESS, ATTACKER = "10.0.0.7", "203.0.113.66"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def catalog(path: Path, clock: Clock, hasher: PasswordHasher = CHEAP, **kw) -> SecurityCatalog:
    sec = SecurityCatalog(
        path / "catalog.db",
        password_hasher=hasher,
        clock=clock,
        throttle=kw.pop("throttle", ThrottlePolicy(3, window=600, base_delay=10, max_delay=100)),
        **kw,
    )
    sec.catalog.set_roles(["ADMIN", "USER"], [])
    sec.create_user("joe", JOE_PW, ["ADMIN"])
    joe = sec.login("joe", JOE_PW)
    sec.create_user("al", AL_PW, ["USER"], by=joe)
    return sec


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sec(tmp_path: Path, clock: Clock) -> SecurityCatalog:
    return catalog(tmp_path, clock)


# -- lockout -----------------------------------------------------------------------------------


def test_a_third_party_cannot_lock_a_user_out_from_another_address(sec: SecurityCatalog) -> None:
    for _ in range(3):
        with pytest.raises(AuthError):
            sec.login("al", "guess", client=ATTACKER)
    for _ in range(20):  # the attacker keeps trying: refused before any password check
        with pytest.raises(Throttled):
            sec.login("al", "guess", client=ATTACKER)
    assert sec.login("al", AL_PW, client=HER_ADDRESS).user == "al"
    with pytest.raises(Throttled):  # and the attacker is still held back
        sec.login("al", AL_PW, client=ATTACKER)


def test_the_wait_of_one_address_grows_with_every_failure(
    sec: SecurityCatalog, clock: Clock
) -> None:
    waits = []
    for _ in range(4):
        for _ in range(3 if not waits else 1):
            with pytest.raises(AuthError):
                sec.login("al", "guess", client=ATTACKER)
        with pytest.raises(Throttled) as throttled:
            sec.login("al", AL_PW, client=ATTACKER)
        waits.append(throttled.value.retry_after)
        clock.now += throttled.value.retry_after + 0.001
    assert waits == pytest.approx([10, 20, 40, 80])


def test_one_address_trying_many_names_is_throttled(sec: SecurityCatalog) -> None:
    for name in ("al", "nobody", "joe"):
        with pytest.raises(AuthError):
            sec.login(name, "guess", client=ATTACKER)
    with pytest.raises(Throttled):
        sec.login("someone-else", "guess", client=ATTACKER)
    assert sec.login("joe", JOE_PW, client=HER_ADDRESS).user == "joe"


def test_a_password_change_is_not_a_lockout_lever(sec: SecurityCatalog) -> None:
    """A stolen session guessing the current password is throttled on its own address."""
    stolen = sec.login("al", AL_PW, client=ATTACKER)
    for _ in range(3):
        with pytest.raises(WrongPassword):
            sec.change_password(stolen, "guess-guess-guess", "new-password-456")
    with pytest.raises(Throttled):
        sec.change_password(stolen, AL_PW, "new-password-456")
    assert sec.login("al", AL_PW, client=HER_ADDRESS).user == "al"


# -- probing -----------------------------------------------------------------------------------


def test_unknown_user_and_wrong_password_fail_alike_in_the_same_time(tmp_path: Path) -> None:
    # a real argon2id cost (smaller than the default's 64 MiB to keep the suite fast), so
    # that a skipped verification would show; no throttling in the way of the measurement
    hasher = PasswordHasher(time_cost=2, memory_cost=16 * 1024, parallelism=1, type=Type.ID)
    policy = ThrottlePolicy(free_failures=10_000, window=1, base_delay=1, max_delay=1)
    sec = catalog(tmp_path, Clock(), hasher, throttle=policy)
    timings: dict[str, list[float]] = {"al": [], "nobody": []}
    messages = set()
    for _ in range(15):
        for name in timings:  # interleaved, so drift in machine load hits both alike
            started = time.perf_counter()
            with pytest.raises(AuthError) as failed:
                sec.login(name, "wrong-password-1")
            timings[name].append(time.perf_counter() - started)
            messages.add((type(failed.value), str(failed.value)))
    assert len(messages) == 1
    ratio = statistics.median(timings["nobody"]) / statistics.median(timings["al"])
    assert 0.7 < ratio < 1.4, timings


# -- sessions ----------------------------------------------------------------------------------


def test_sessions_expire_and_die_at_logout(sec: SecurityCatalog, clock: Clock) -> None:
    first, second = sec.login("al", AL_PW), sec.login("al", AL_PW)
    sec.logout(first.token)
    with pytest.raises(AuthError):
        sec.session(first.token)
    assert sec.session(second.token).user == "al"
    clock.now += sec.session_ttl
    with pytest.raises(AuthError):
        sec.session(second.token)


def test_a_token_acts_only_as_its_own_user(sec: SecurityCatalog) -> None:
    al = sec.login("al", AL_PW)
    disguised = Session(al.token, "joe", frozenset({"ADMIN"}), al.expires_at, None)
    assert sec.session(al.token).user == "al"
    with pytest.raises((PermissionDenied, AuthError)):
        sec.require(disguised, Permission.CHANGE_SYSTEM, SYSTEM)


def test_changing_ones_password_ends_ones_other_sessions(sec: SecurityCatalog) -> None:
    thief, mine = sec.login("al", AL_PW, client=ATTACKER), sec.login("al", AL_PW)
    sec.change_password(mine, AL_PW, "new-password-456")
    with pytest.raises(AuthError):
        sec.session(thief.token)
    assert sec.session(mine.token).user == "al"  # the session that changed it goes on
    with pytest.raises(AuthError):
        sec.login("al", AL_PW)
    assert sec.login("al", "new-password-456").user == "al"


def test_a_password_reset_ends_every_session_of_the_user(sec: SecurityCatalog) -> None:
    joe = sec.login("joe", JOE_PW)
    sessions = [sec.login("al", AL_PW), sec.login("al", AL_PW, client=HER_ADDRESS)]
    sec.reset_password(joe, "al", "reset-password-789")
    for session in sessions:
        with pytest.raises(AuthError):
            sec.session(session.token)
    assert sec.session(joe.token).user == "joe"  # other users' sessions are untouched
    assert sec.login("al", "reset-password-789").user == "al"

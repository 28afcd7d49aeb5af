"""Password hashing and login throttling: the pure parts of authentication."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher, Type
from hypothesis import given
from hypothesis import strategies as st

from streamshield.catalog.passwords import DEFAULT_HASHER, Passwords
from streamshield.catalog.throttle import ThrottlePolicy

CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)


def test_default_parameters_are_argon2id_rfc9106() -> None:
    params = DEFAULT_HASHER
    assert (params.type, params.time_cost, params.memory_cost, params.parallelism) == (
        Type.ID,
        3,
        65536,
        1,
    )


def test_hash_verify_and_salting() -> None:
    passwords = Passwords(CHEAP)
    first, second = passwords.hash("s3cret"), passwords.hash("s3cret")
    assert first != second and first.startswith("$argon2id$")
    assert passwords.verify(first, "s3cret")
    assert not passwords.verify(first, "s3cret ")
    assert not passwords.verify("not a hash", "s3cret")


def test_unknown_users_never_verify_even_with_the_dummy_password() -> None:
    passwords = Passwords(CHEAP)
    assert not passwords.verify(None, "streamshield dummy password: never matches a login")


def test_other_argon2_variants_are_refused() -> None:
    with pytest.raises(ValueError, match="argon2id"):
        Passwords(PasswordHasher(type=Type.I))
    with pytest.raises(ValueError):
        Passwords(CHEAP).hash("")


POLICY = ThrottlePolicy(free_failures=3, window=100.0, base_delay=2.0, max_delay=16.0)


def test_free_failures_then_doubling_waits_up_to_the_cap() -> None:
    assert POLICY.retry_after([1.0, 2.0], now=3.0) == 0.0
    assert POLICY.retry_after([1.0, 2.0, 3.0], now=3.0) == 2.0
    assert POLICY.retry_after([1.0, 2.0, 3.0, 4.0], now=4.0) == 4.0
    assert POLICY.retry_after([1.0, 2.0, 3.0, 4.0], now=7.0) == 1.0
    assert POLICY.retry_after([float(i) for i in range(1, 40)], now=39.0) == 16.0


def test_failures_leave_the_window() -> None:
    assert POLICY.retry_after([1.0, 2.0, 3.0], now=102.5) == 0.0  # 1.0 and 2.0 expired


@given(st.lists(st.floats(0, 1000), max_size=30), st.floats(0, 1000), st.floats(0, 1000))
def test_waits_are_bounded_and_more_failures_never_shorten_them(
    failures: list[float], extra: float, now: float
) -> None:
    wait = POLICY.retry_after(failures, now)
    assert 0.0 <= wait <= POLICY.max_delay
    if extra <= now:
        assert POLICY.retry_after([*failures, extra], now) >= wait


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ThrottlePolicy(free_failures=0)


def test_unknown_users_cost_a_real_hash_verification() -> None:
    """Same work for a missing user as for a wrong password: no early return on None."""
    verified: list[str] = []

    class Counting(PasswordHasher):
        def verify(self, hash: str | bytes, password: str | bytes) -> bool:
            verified.append(str(hash))
            return super().verify(hash, password)

    passwords = Passwords(Counting(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID))
    assert not passwords.verify(None, "guess")
    assert len(verified) == 1 and verified[0].startswith("$argon2id$")

"""Password hashing with argon2id (argon2-cffi), and the dummy hash for unknown users.

Default parameters: argon2id, time cost 3, memory 64 MiB, parallelism 1, 16-byte salt,
32-byte hash (RFC 9106's second recommended option, argon2-cffi's default profile).
They are stored inside each hash, so raising them later only needs a rehash on the
next successful login (:meth:`Passwords.needs_rehash`). Tests pass a cheaper hasher.

Logging in as an unknown user verifies the password against a dummy hash made with the
same hasher, so that a wrong name and a wrong password take about the same time.
"""

from __future__ import annotations

from functools import cached_property

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError

DEFAULT_HASHER = PasswordHasher(
    time_cost=3, memory_cost=64 * 1024, parallelism=1, hash_len=32, salt_len=16, type=Type.ID
)


class Passwords:
    """Hashes and verifies passwords with one argon2id hasher."""

    def __init__(self, hasher: PasswordHasher = DEFAULT_HASHER) -> None:
        if hasher.type is not Type.ID:
            raise ValueError("passwords are hashed with argon2id only")
        self.hasher = hasher

    @cached_property
    def _dummy(self) -> str:
        return self.hasher.hash("streamshield dummy password: never matches a login")

    def prepare(self) -> None:
        """Makes the dummy hash now, so the first unknown-name login does not pay for it
        (one visibly slower failure would tell that the name does not exist)."""
        _ = self._dummy

    def hash(self, password: str) -> str:
        if not isinstance(password, str) or not password:
            raise ValueError("a password must be a non-empty string")
        return self.hasher.hash(password)

    def verify(self, stored_hash: str | None, password: str) -> bool:
        """True iff the password matches; a missing user (None) costs the same and fails."""
        target = self._dummy if stored_hash is None else stored_hash
        try:
            matched = self.hasher.verify(target, password)
        except (VerificationError, InvalidHashError):
            return False
        return matched and stored_hash is not None

    def needs_rehash(self, stored_hash: str) -> bool:
        return self.hasher.check_needs_rehash(stored_hash)

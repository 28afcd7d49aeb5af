"""Throttling of failed logins: a pure decision over the times of recent failures.

Failures are counted per (user name, client address) pair (known names or not, so that
throttling does not reveal which names exist) and per client address. There is
deliberately no key on the user name alone: anyone can type a name, so a limit on the
name would let a third party lock its owner out from another address. The pair key
slows guessing one user's password from one address; the client key slows one address
guessing many names. Once a key has ``free_failures`` failures
inside ``window``, the next attempt must wait ``base_delay`` after the latest failure,
and every further failure doubles that wait, up to ``max_delay``. While a key waits,
every attempt is refused *before* the password is checked, a correct one included, so
guessing cannot go on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

CLIENT = "client"
"""``key_kind`` of the per-client key (``key`` is the address)."""
PAIR_PREFIX = "u:"
"""``key_kind`` prefix of the per-(user, client) key; ``key`` is the user name."""


def login_keys(name: str, client: str | None) -> list[tuple[str, str]]:
    """The (key_kind, key) pairs a login attempt of ``name`` from ``client`` counts under.

    The pair key keeps the user name as ``key`` (so a password reset can clear all of a
    user's pairs) and a short digest of the address in ``key_kind`` (10 characters fit
    the column whatever the address).
    """
    digest = hashlib.sha256((client or "").encode()).hexdigest()[:8]
    keys = [(PAIR_PREFIX + digest, name)]
    return keys + ([(CLIENT, client)] if client else [])


@dataclass(frozen=True)
class ThrottlePolicy:
    free_failures: int = 5
    window: float = 15 * 60.0
    base_delay: float = 1.0
    max_delay: float = 15 * 60.0

    def __post_init__(self) -> None:
        if self.free_failures < 1 or min(self.window, self.base_delay, self.max_delay) <= 0:
            raise ValueError("throttle limits must be positive")

    def retry_after(self, failures: Iterable[float], now: float) -> float:
        """Seconds until the next attempt is allowed (0.0: allowed now)."""
        recent = sorted(at for at in failures if now - self.window < at <= now)
        excess = len(recent) - self.free_failures
        if excess < 0:
            return 0.0
        delay = min(self.base_delay * 2.0 ** min(excess, 60), self.max_delay)
        return max(0.0, recent[-1] + delay - now)

"""Stream elements: tuples and sps as they travel on a channel.

Order exists only inside a channel = (stream, provider), and it is carried by ``seq``,
never by arrival: Spark does not keep row order, so every consumer sorts by ``seq``.
A tuple names the policy it believes governs it by ``(policy_ts, policy_csn)``; the
shield trusts that only when it agrees with the sps it actually received.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from streamshield.policy.punctuation import SecurityPunctuation


@dataclass(frozen=True, order=True)
class Channel:
    stream: str
    provider: str

    def __str__(self) -> str:
        return f"{self.stream}/{self.provider}"


@dataclass(frozen=True)
class TupleElement:
    """A data tuple: ``tid`` is its tuple id (the object tuple patterns match)."""

    channel: Channel
    seq: int
    tid: object
    policy_ts: int
    policy_csn: int
    values: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class SpElement:
    channel: Channel
    seq: int
    sp: SecurityPunctuation


Element: TypeAlias = TupleElement | SpElement

"""Security punctuations (paper 1, section 4 and Definition 4.1).

An sp is ``<DDP | SRP | sign | immutable | ts | sn>``: which objects (streams, tuples,
attributes), which roles (optionally with grant option), grant or deny, whether
server-side policies may refine it, the policy's timestamp and the sp's sequence
number inside its policy. Sps are immutable values so that policies built from them
can be hashed, deduplicated and compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from streamshield.policy.privileges import SP_PRIVILEGES, Privilege
from streamshield.policy.sp_patterns import ANY, Pattern


class Sign(Enum):
    """Positive sps grant, negative sps deny; a deny for any effective role wins."""

    GRANT = "+"
    DENY = "-"


@dataclass(frozen=True)
class DataDescription:
    """The DDP: the objects an sp talks about."""

    streams: Pattern = ANY
    tuples: Pattern = ANY
    attributes: Pattern = ANY

    def matches_tuple(self, stream: str, tid: object) -> bool:
        """Whether the sp applies to this tuple at all (stream and tuple scope)."""
        return self.streams.matches(stream) and self.tuples.matches(tid)

    def covers_attributes(self, attributes: Iterable[str]) -> bool:
        """Whether the attribute scope takes in every attribute, i.e. the whole tuple."""
        return all(self.attributes.matches(a) for a in attributes)


@dataclass(frozen=True)
class SecurityRestriction:
    """The SRP: RBAC roles (a pattern over role names), the grant option and the privilege.

    ``FOR STATISTICS`` (paper 4's Omega) lets the roles use the objects in aggregates only.
    """

    roles: Pattern
    grant_option: bool = False
    privilege: Privilege = Privilege.READ

    def __post_init__(self) -> None:
        if self.privilege not in SP_PRIVILEGES:
            raise ValueError(f"an sp grants READ or STATISTICS, not {self.privilege.name}")


@dataclass(frozen=True)
class SecurityPunctuation:
    """One sp. ``ts`` identifies its policy, ``sn`` (1-based) its place in that policy."""

    ddp: DataDescription
    srp: SecurityRestriction
    sign: Sign = Sign.GRANT
    immutable: bool = False
    ts: int = 0
    sn: int = 1

    def __post_init__(self) -> None:
        if self.ts <= 0:
            raise ValueError(f"sp timestamp must be positive, got {self.ts}")
        if self.sn < 1:
            raise ValueError(f"sp sequence number must be >= 1, got {self.sn}")
        if self.sign is Sign.DENY and self.srp.grant_option:
            raise ValueError("a negative sp cannot carry a grant option")
        if self.sign is Sign.DENY and self.srp.privilege is not Privilege.READ:
            raise ValueError("a negative sp denies every privilege; it cannot be FOR STATISTICS")

    @property
    def body(self) -> tuple[object, ...]:
        """What the sp says, without where it sits: policies with equal bodies decide alike."""
        return (self.ddp, self.srp, self.sign, self.immutable)


def canonical_text(sp: SecurityPunctuation) -> str:
    """A deterministic one-line form of an sp's body, for hashing policies into ids.

    READ sps keep the form they had before privileges existed (stable policy ids).
    """
    ddp, srp = sp.ddp, sp.srp
    fields = [
        ddp.streams.text(),
        ddp.tuples.text(),
        ddp.attributes.text(),
        srp.roles.text(),
        "G" if srp.grant_option else "-G",
        sp.sign.value,
        "T" if sp.immutable else "F",
    ]
    if srp.privilege is not Privilege.READ:
        fields.append(srp.privilege.name)
    return "|".join(fields)

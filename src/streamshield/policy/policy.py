"""Policies as sp batches, and what a policy decides for one tuple (paper 1, 4-4.2).

Consecutive sps with one timestamp form a policy. A policy is *complete* for a tuple
when its sequence numbers are exactly 1..csn and csn is what the tuple declares;
anything else is denied by default.

What a policy decides for a tuple is a :class:`Label`: an :class:`Access` for the
tuple and one per attribute. An Access holds upward-closed role sets (a grant to r
reaches r and every senior of r, see :mod:`roles`), so the check for a query is just
"its effective roles meet ``readers`` and miss ``denied``" - the same test the Spark
engine runs on bitset columns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from streamshield.policy.patterns import Any, Literal, OneOf, Pattern
from streamshield.policy.punctuation import SecurityPunctuation, Sign, canonical_text
from streamshield.policy.roles import RoleHierarchy, UnknownRoleError


class PolicyError(ValueError):
    """A policy that cannot be used (unknown role, conflicting sps): its tuples are denied."""


class Combine(Enum):
    """How server-side policies refine provider policies (paper 1, section 4.2)."""

    INTERSECT = "intersect"  # server policies can only narrow access (default)
    UNION = "union"  # server policies may widen access


@dataclass(frozen=True)
class Policy:
    """The sps of one batch (one ``ts``), in sequence-number order, duplicates removed."""

    ts: int
    sps: tuple[SecurityPunctuation, ...]

    @classmethod
    def of(cls, sps: Iterable[SecurityPunctuation]) -> Policy:
        """A policy from sps of one timestamp; PolicyError on mixed ts or conflicting sns."""
        by_sn: dict[int, SecurityPunctuation] = {}
        for sp in sps:
            known = by_sn.setdefault(sp.sn, sp)
            if known != sp:
                raise PolicyError(f"two different sps claim sequence number {sp.sn}")
        if not by_sn:
            raise PolicyError("a policy needs at least one sp")
        timestamps = {sp.ts for sp in by_sn.values()}
        if len(timestamps) != 1:
            raise PolicyError(f"sps of one policy must share a timestamp, got {sorted(timestamps)}")
        return cls(timestamps.pop(), tuple(by_sn[sn] for sn in sorted(by_sn)))

    @property
    def csn(self) -> int:
        """The cumulative sequence number: the largest n such that sps 1..n are all present."""
        csn = 0
        for sp in self.sps:
            if sp.sn != csn + 1:
                break
            csn = sp.sn
        return csn

    def is_complete(self, declared_csn: int) -> bool:
        """Exactly sps 1..declared_csn: a gap or an extra sp both mean we cannot trust it."""
        return self.csn == declared_csn == len(self.sps)

    @cached_property
    def policy_id(self) -> str:
        """Content hash of the sps' bodies: identical policies share one id (and one decision)."""
        text = "\n".join(sorted(canonical_text(sp) for sp in self.sps))
        return "p" + hashlib.sha256(text.encode()).hexdigest()[:15]

    @property
    def immutable(self) -> tuple[SecurityPunctuation, ...]:
        return tuple(sp for sp in self.sps if sp.immutable)

    @property
    def mutable(self) -> tuple[SecurityPunctuation, ...]:
        return tuple(sp for sp in self.sps if not sp.immutable)


def match(sp: SecurityPunctuation, stream: str, tid: object) -> bool:
    """``match(t, sp)``: whether the sp's data description takes in the tuple."""
    return sp.ddp.matches_tuple(stream, tid)


@dataclass(frozen=True)
class Access:
    """Who may read one object: roles in ``readers`` may, unless the query has a denied role."""

    readers: frozenset[str] = frozenset()
    denied: frozenset[str] = frozenset()

    def allows(self, effective_roles: frozenset[str]) -> bool:
        return bool(effective_roles & self.readers) and not effective_roles & self.denied

    def union(self, other: Access) -> Access:
        """A role reads if either side lets it; denials always accumulate (deny overrides)."""
        return Access(self.readers | other.readers, self.denied | other.denied)

    def intersect(self, other: Access) -> Access:
        """A role reads only if both sides let it; denials accumulate."""
        return Access(self.readers & other.readers, self.denied | other.denied)


NO_ACCESS = Access()


@dataclass(frozen=True)
class Label:
    """A policy's decision for one tuple: tuple-level access and per-attribute access."""

    tuple_access: Access = NO_ACCESS
    attributes: Mapping[str, Access] = field(default_factory=dict)
    grantable: frozenset[str] = frozenset()  # roles that hold the grant option on the tuple
    policy_id: str | None = None

    def visible(self, effective_roles: frozenset[str]) -> bool:
        return self.tuple_access.allows(effective_roles)

    def visible_attributes(self, effective_roles: frozenset[str]) -> frozenset[str]:
        """Attributes the query sees unmasked; none when the tuple itself is hidden."""
        if not self.visible(effective_roles):
            return frozenset()
        return frozenset(a for a, acc in self.attributes.items() if acc.allows(effective_roles))


DENY_ALL = Label()


def role_members(pattern: Pattern, hierarchy: RoleHierarchy) -> frozenset[str]:
    """``eval(R, Roles, E_r)``; a literal naming an unknown role makes the sp unusable."""
    if isinstance(pattern, Literal | OneOf):
        literals = [pattern] if isinstance(pattern, Literal) else list(pattern.values)
        return hierarchy.check(str(lit.value) for lit in literals)
    if isinstance(pattern, Any):
        return frozenset(hierarchy.roles)
    return frozenset(r for r in hierarchy.roles if pattern.matches(r))


@dataclass(frozen=True)
class _Scope:
    """Grants and denials of a set of sps for one tuple, before upward closure."""

    hierarchy: RoleHierarchy
    sps: Sequence[SecurityPunctuation]
    attributes: Sequence[str]

    def _roles(self, sp: SecurityPunctuation) -> frozenset[str]:
        try:
            return role_members(sp.srp.roles, self.hierarchy)
        except UnknownRoleError as err:
            raise PolicyError(str(err)) from err

    def _granting(self, attribute: str | None) -> Iterable[SecurityPunctuation]:
        for sp in self.sps:
            if sp.sign is not Sign.GRANT:
                continue
            if attribute is None:
                if any(sp.ddp.attributes.matches(a) for a in self.attributes):
                    yield sp
            elif sp.ddp.attributes.matches(attribute):
                yield sp

    def _denying(self, attribute: str | None) -> Iterable[SecurityPunctuation]:
        for sp in self.sps:
            if sp.sign is not Sign.DENY:
                continue
            if attribute is None:
                if sp.ddp.covers_attributes(self.attributes):
                    yield sp
            elif sp.ddp.attributes.matches(attribute):
                yield sp

    def covers(self, attribute: str | None) -> bool:
        """Whether any of the sps speaks about the object at all."""
        return any(True for _ in self._granting(attribute)) or any(
            True for _ in self._denying(attribute)
        )

    def access(self, attribute: str | None) -> Access:
        """Tuple access (attribute None) or one attribute's access under these sps."""
        granted = frozenset().union(*(self._roles(sp) for sp in self._granting(attribute)))
        denied = frozenset().union(*(self._roles(sp) for sp in self._denying(attribute)))
        return Access(self.hierarchy.readers(granted), self.hierarchy.readers(denied))

    def grantable(self) -> frozenset[str]:
        roles = frozenset().union(
            *(self._roles(sp) for sp in self._granting(None) if sp.srp.grant_option)
        )
        return self.hierarchy.readers(roles)


@dataclass(frozen=True)
class ServerPolicy:
    """Policies the system adds to provider policies; they apply only to objects they describe."""

    sps: tuple[SecurityPunctuation, ...] = ()
    mode: Combine = Combine.INTERSECT


def label_for(
    policy: Policy,
    stream: str,
    tid: object,
    attributes: Sequence[str],
    hierarchy: RoleHierarchy,
    server: ServerPolicy | None = None,
) -> Label:
    """What ``policy`` (refined by ``server``) decides for one tuple of ``stream``.

    Readers: grants of mutable provider sps, combined with the server's own readers
    (grants minus its denials) where the server policy describes the object, plus grants
    of immutable sps, which the server never touches. Denials: every provider deny.
    Raises PolicyError when the policy names an unknown role.
    """

    def applicable(sps: Iterable[SecurityPunctuation]) -> _Scope:
        return _Scope(hierarchy, [sp for sp in sps if match(sp, stream, tid)], attributes)

    mutable, immutable = applicable(policy.mutable), applicable(policy.immutable)
    refining = applicable(server.sps) if server else None

    def access(attribute: str | None) -> Access:
        provider = mutable.access(attribute)
        if refining is not None and refining.covers(attribute):
            srv = refining.access(attribute)
            srv_readers = Access(srv.readers - srv.denied)
            provider = (
                provider.intersect(srv_readers)
                if server.mode is Combine.INTERSECT
                else provider.union(srv_readers)
            )
        return provider.union(immutable.access(attribute))

    return Label(
        tuple_access=access(None),
        attributes={a: access(a) for a in attributes},
        grantable=mutable.grantable() | immutable.grantable(),
        policy_id=policy.policy_id,
    )

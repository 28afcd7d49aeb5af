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

from streamshield.policy.policy_errors import PolicyError as PolicyError  # re-exported
from streamshield.policy.privileges import Privilege, granted_twins, query_twins
from streamshield.policy.punctuation import SecurityPunctuation, Sign, canonical_text
from streamshield.policy.roles import RoleHierarchy, UnknownRoleError
from streamshield.policy.sp_patterns import Any, Literal, OneOf, Pattern


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
        if isinstance(sps, list | tuple) and len(sps) == 1:
            # the common case (one sp per policy; once per tuple at one sp per tuple):
            # nothing to order, dedupe or check, so the same policy as below, directly
            return cls(sps[0].ts, (sps[0],))
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
        """Content hash of the sps' bodies: identical policies share one id (and one decision).

        Remembered by the identity of the sps' body objects (:func:`_identity`): secure
        ingest reads every sp of one wire body into the same pattern and restriction
        objects (``wire.sp_of_columns``), so at one sp per tuple a body re-sent under a
        new ts is not rendered and hashed again. The entry holds those objects, so their
        identities cannot be reused by other objects while it lives; objects not shared
        (bodies parsed apart) only miss the cache, never share an entry."""
        key = tuple(_identity(sp) for sp in self.sps)
        kept = _IDS.get(key)
        if kept is not None:
            return kept[1]
        policy_id = content_id(self.sps)
        if len(_IDS) >= _ID_LIMIT:
            _IDS.clear()
        _IDS[key] = (tuple((sp.ddp, sp.srp) for sp in self.sps), policy_id)
        return policy_id

    @property
    def immutable(self) -> tuple[SecurityPunctuation, ...]:
        return tuple(sp for sp in self.sps if sp.immutable)

    @property
    def mutable(self) -> tuple[SecurityPunctuation, ...]:
        return tuple(sp for sp in self.sps if not sp.immutable)


def content_id(sps: Iterable[SecurityPunctuation]) -> str:
    """The policy id of ``sps``: a hash of their bodies' canonical texts (not their ts or
    sn), so a policy re-sent under a new ts keeps its id."""
    text = "\n".join(sorted(canonical_text(sp) for sp in sps))
    return "p" + hashlib.sha256(text.encode()).hexdigest()[:15]


_ID_LIMIT = 65_536
_Identity = tuple[int, int, Sign, bool]
_IDS: dict[tuple[_Identity, ...], tuple[tuple[tuple[object, object], ...], str]] = {}
"""Policy ids by :func:`_identity` of their sps, with the objects that identity names."""


def _identity(sp: SecurityPunctuation) -> _Identity:
    """What an sp's canonical text is a function of: its pattern and restriction objects
    (frozen; by identity, which is cheap where equality would compare every pattern) and
    its sign and immutability as the text renders them."""
    return (id(sp.ddp), id(sp.srp), sp.sign, bool(sp.immutable))


def match(sp: SecurityPunctuation, stream: str, tid: object) -> bool:
    """``match(t, sp)``: whether the sp's data description takes in the tuple."""
    return sp.ddp.matches_tuple(stream, tid)


@dataclass(frozen=True)
class Access:
    """Who may do what with one object: one role set per privilege twin, plus the denied.

    ``readers`` hold READ, ``statistics`` the STATISTICS twin (set by READ grants too),
    ``grantable`` the GRANT twin (WITH GRANT OPTION). A denied role gets nothing.
    """

    readers: frozenset[str] = frozenset()
    denied: frozenset[str] = frozenset()
    statistics: frozenset[str] = frozenset()
    grantable: frozenset[str] = frozenset()

    def twin(self, privilege: Privilege) -> frozenset[str]:
        """The roles holding one twin."""
        if privilege is Privilege.READ:
            return self.readers
        return self.statistics if privilege is Privilege.STATISTICS else self.grantable

    def allows(
        self, effective_roles: frozenset[str], privilege: Privilege = Privilege.READ
    ) -> bool:
        holders = frozenset().union(*(self.twin(p) for p in query_twins(privilege)))
        return bool(effective_roles & holders) and not effective_roles & self.denied

    def union(self, other: Access) -> Access:
        """A role holds a twin if either side gives it; denials always accumulate."""
        return Access(
            self.readers | other.readers,
            self.denied | other.denied,
            self.statistics | other.statistics,
            self.grantable | other.grantable,
        )

    def intersect(self, other: Access) -> Access:
        """A role holds a twin only if both sides give it; denials accumulate."""
        return Access(
            self.readers & other.readers,
            self.denied | other.denied,
            self.statistics & other.statistics,
            self.grantable & other.grantable,
        )

    def granted_only(self) -> Access:
        """Every twin minus the denied roles, with no denials of its own (a server's grants)."""
        d = self.denied
        return Access(self.readers - d, frozenset(), self.statistics - d, self.grantable - d)


NO_ACCESS = Access()


@dataclass(frozen=True)
class Label:
    """A policy's decision for one tuple: tuple-level access and per-attribute access."""

    tuple_access: Access = NO_ACCESS
    attributes: Mapping[str, Access] = field(default_factory=dict)
    policy_id: str | None = None

    @property
    def grantable(self) -> frozenset[str]:
        """Roles that hold the tuple with grant option (before denials)."""
        return self.tuple_access.grantable

    def visible(
        self, effective_roles: frozenset[str], privilege: Privilege = Privilege.READ
    ) -> bool:
        return self.tuple_access.allows(effective_roles, privilege)

    def visible_attributes(
        self, effective_roles: frozenset[str], privilege: Privilege = Privilege.READ
    ) -> frozenset[str]:
        """Attributes the query sees for ``privilege``; none when the tuple itself is hidden."""
        if not self.visible(effective_roles, privilege):
            return frozenset()
        return frozenset(
            a for a, acc in self.attributes.items() if acc.allows(effective_roles, privilege)
        )


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
        twins: dict[Privilege, frozenset[str]] = {p: frozenset() for p in Privilege}
        for sp in self._granting(attribute):
            roles = self._roles(sp)
            for twin in granted_twins(sp.srp.privilege, sp.srp.grant_option):
                twins[twin] |= roles
        denied = frozenset().union(*(self._roles(sp) for sp in self._denying(attribute)))
        up = self.hierarchy.readers
        return Access(
            up(twins[Privilege.READ]),
            up(denied),
            up(twins[Privilege.STATISTICS]),
            up(twins[Privilege.GRANT]),
        )


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
    Each privilege twin (READ, STATISTICS, GRANT) is combined this way on its own.
    Raises PolicyError when the policy names an unknown role.
    """

    def applicable(sps: Iterable[SecurityPunctuation]) -> _Scope:
        return _Scope(hierarchy, [sp for sp in sps if match(sp, stream, tid)], attributes)

    mutable, immutable = applicable(policy.mutable), applicable(policy.immutable)
    refining = applicable(server.sps) if server else None

    def access(attribute: str | None) -> Access:
        provider = mutable.access(attribute)
        if server is not None and refining is not None and refining.covers(attribute):
            srv_readers = refining.access(attribute).granted_only()
            provider = (
                provider.intersect(srv_readers)
                if server.mode is Combine.INTERSECT
                else provider.union(srv_readers)
            )
        return provider.union(immutable.access(attribute))

    return Label(
        tuple_access=access(None),
        attributes={a: access(a) for a in attributes},
        policy_id=policy.policy_id,
    )

"""A policy as a person reads it: its sps' scopes and the roles it admits or denies.

The stream page of the console and ``GET /streams/{name}/ingest`` show the policy in
force on each channel. Its label per tuple depends on the tuple's id and the attributes
(``policy.label_for``); what a reader wants first is shorter: which roles may read
something under it at all, and which are denied something. Both are closed upward
through the role hierarchy, as labels are (a senior reads what a junior reads). The
sps are listed too, so the exact scope of every grant and denial stays visible.

Pure Python: no Spark, no catalog.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamshield.policy.policy import Combine, Policy, ServerPolicy, role_members
from streamshield.policy.punctuation import SecurityPunctuation, Sign
from streamshield.policy.roles import RoleHierarchy, UnknownRoleError


@dataclass(frozen=True)
class SpView:
    sign: str
    """``+`` grants, ``-`` denies."""
    roles: str
    streams: str
    tuples: str
    attributes: str
    privilege: str
    grant_option: bool
    immutable: bool


@dataclass(frozen=True)
class PolicyView:
    policy_id: str
    ts: int
    admits: tuple[str, ...]
    """Roles granted READ or STATISTICS on some tuple or attribute (closed upward)."""
    denies: tuple[str, ...]
    """Roles some sp denies something (closed upward); they read none of that."""
    unknown_roles: bool
    """An sp names a role the hierarchy does not know: the policy labels nothing."""
    sps: tuple[SpView, ...]


def sp_view(sp: SecurityPunctuation) -> SpView:
    ddp, srp = sp.ddp, sp.srp
    return SpView(
        sign=sp.sign.value,
        roles=srp.roles.text(),
        streams=ddp.streams.text(),
        tuples=ddp.tuples.text(),
        attributes=ddp.attributes.text(),
        privilege=srp.privilege.value,
        grant_option=srp.grant_option,
        immutable=sp.immutable,
    )


def policy_view(
    policy: Policy, hierarchy: RoleHierarchy, server: ServerPolicy | None = None
) -> PolicyView:
    """What ``policy`` says, with its admitted and denied roles under ``hierarchy``.

    ``server``: the stream's server policy. In UNION mode its grants add readers
    (``label_for``), so they are admitted here too; INTERSECT only narrows, and
    ``admits`` stays a superset of who reads."""
    admits: set[str] = set()
    denies: set[str] = set()
    unknown = False
    extra = server.sps if server is not None and server.mode is Combine.UNION else ()
    for sp in (*policy.sps, *extra):
        try:
            roles = role_members(sp.srp.roles, hierarchy)
        except UnknownRoleError:
            unknown = True
            continue
        (admits if sp.sign is Sign.GRANT else denies).update(roles)
    if unknown:  # label_for refuses such a policy: nobody reads under it
        admits.clear()
    return PolicyView(
        policy_id=policy.policy_id,
        ts=policy.ts,
        admits=tuple(sorted(hierarchy.readers(admits))),
        denies=tuple(sorted(hierarchy.readers(denies))),
        unknown_roles=unknown,
        sps=tuple(sp_view(sp) for sp in policy.sps),
    )


def admitted_among(view: PolicyView, roles: Iterable[str]) -> tuple[str, ...]:
    """The given roles (a caller's own) that ``view`` admits: what a reader may learn
    about a policy she is not entitled to read in full."""
    return tuple(sorted(set(roles) & set(view.admits)))

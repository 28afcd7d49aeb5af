"""Who may delegate: the registration-time check behind ``ON RESULT`` (paper 1, section 4.4).

A query may attach sps to its result only if its roles hold the data WITH GRANT OPTION.
Grant options travel inside the data (sps), so at registration the only evidence is
the policies in force on the query's input streams now. A query passes when, on every
input stream, some policy in force grants one of its effective roles with grant option
(a grant to r reaches r's seniors, as for reading). Nothing in force, or no such sp:
rejected (deny by default). Per tuple, the engine enforces the same rule again with
the GRANT privilege in the labels, so a policy that changes later cannot widen this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streamshield.policy.policy import Policy, PolicyError, role_members
from streamshield.policy.punctuation import Sign
from streamshield.policy.roles import RoleHierarchy, UnknownRoleError


def grant_option_holders(
    policies: Iterable[Policy], stream: str, hierarchy: RoleHierarchy
) -> frozenset[str]:
    """Roles that the policies grant something of ``stream`` with grant option."""
    granted: set[str] = set()
    for policy in policies:
        for sp in policy.sps:
            if sp.sign is not Sign.GRANT or not sp.srp.grant_option:
                continue
            if not sp.ddp.streams.matches(stream):
                continue
            try:
                granted |= role_members(sp.srp.roles, hierarchy)
            except (UnknownRoleError, PolicyError):
                continue  # an unusable sp grants nothing
    return hierarchy.readers(granted)


def may_delegate(
    in_force: Mapping[str, Iterable[Policy]],
    streams: Iterable[str],
    roles: Iterable[str],
    hierarchy: RoleHierarchy,
) -> bool:
    """Whether a query with ``roles`` over ``streams`` may attach ON RESULT sps."""
    effective = hierarchy.effective(roles)
    streams = list(streams)
    return bool(streams) and all(
        effective & grant_option_holders(in_force.get(s, ()), s, hierarchy) for s in streams
    )

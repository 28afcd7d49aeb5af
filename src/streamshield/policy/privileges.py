"""Privileges a label records per role: READ, STATISTICS and GRANT (paper 1 4.4, paper 4 Omega).

Every role has three *twins* in a label, one per privilege, so that each privilege is
a plain role set and every existing set operation (upward closure, the rule fold,
server-policy intersect/union, deny overrides) works on it unchanged, twin by twin:

* READ: the raw value may be read;
* STATISTICS: the value may only contribute to an aggregate (Omega, Borealis'
  aggregate-read right). A READ grant sets it too, so that a server policy granting
  STATISTICS can narrow a provider's READ to statistics by intersection;
* GRANT: the role received the object WITH GRANT OPTION (for SPGen / ON RESULT).

A deny takes every twin of the denied roles. Which twins a check looks at is
:func:`query_twins`: STATISTICS is satisfied by READ as well (a full read implies it).
"""

from __future__ import annotations

from enum import Enum


class Privilege(Enum):
    """A privilege; the declaration order is the order of the twin blocks in a label."""

    READ = "read"
    STATISTICS = "statistics"
    GRANT = "grant"

    @property
    def block(self) -> int:
        """Index of this privilege's block of words in an encoded label."""
        return list(Privilege).index(self)


SP_PRIVILEGES = (Privilege.READ, Privilege.STATISTICS)
"""What an sp can grant; GRANT comes only with ``WITH GRANT OPTION``."""


def granted_twins(privilege: Privilege, grant_option: bool) -> frozenset[Privilege]:
    """The twins a positive sp for ``privilege`` sets for its readers."""
    if privilege not in SP_PRIVILEGES:
        raise ValueError(f"an sp grants READ or STATISTICS, not {privilege.name}")
    twins = {Privilege.STATISTICS}
    if privilege is Privilege.READ:
        twins.add(Privilege.READ)
    if grant_option:
        twins.add(Privilege.GRANT)
    return frozenset(twins)


def query_twins(privilege: Privilege) -> frozenset[Privilege]:
    """The twins a query for ``privilege`` is satisfied by (READ implies STATISTICS)."""
    if privilege is Privilege.STATISTICS:
        return frozenset({Privilege.READ, Privilege.STATISTICS})
    return frozenset({privilege})

"""A recipient outside any session: whom a sink hands rows to.

A sink outlives the session it was attached from, but never its owner's rights: it acts
as the user with the roles that session had active (and, with Chinese-Wall levels on,
at that session's level), and each micro-batch reads again what is left of them. Only
the roles she still holds count (none while she is disabled), SUBSCRIBE on the output
must still be hers with those roles, and her clearance must still dominate the level;
otherwise the batch goes nowhere (deny by default, as for a subscriber whose session
ended).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamshield.catalog.security import Acting
from streamshield.policy.bitset import Words
from streamshield.server import security_port as port


class NotEntitled(PermissionError):
    """The recipient may receive nothing now (a lookup that raises delivers nothing)."""


@dataclass(frozen=True)
class StandingRecipient:
    user: str
    roles: frozenset[str]
    level: str | None = None
    """The level text the attaching session was at (None: levels were off)."""

    def roles_now(self, security: Any) -> frozenset[str]:
        """Her attached roles she still holds (none while disabled)."""
        return self.roles & port.held_roles(security, self.user)

    def who(self, security: Any) -> Acting:
        return Acting(self.user, self.roles_now(security))

    def may_subscribe(self, security: Any, output: str) -> bool:
        roles = self.roles_now(security)
        return bool(roles) and port.can_subscribe(security, Acting(self.user, roles), output)

    def level_now(self, security: Any) -> Words | None:
        """Her level, encoded, while her clearance dominates it; None while levels are
        off. NotEntitled when levels are on and her level is gone or not dominated."""
        lattice = security.lattice()
        if lattice is None:
            return None
        if self.level is None or not security.clearance_dominates(self.user, self.level):
            raise NotEntitled(f"{self.user}'s clearance no longer dominates the sink's level")
        return lattice.encode(lattice.parse(self.level))

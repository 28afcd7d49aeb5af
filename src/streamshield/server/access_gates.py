"""The gates every request passes before it acts: an object it may not see does not exist
(404, the same answer as a missing one), and the system's settings need CHANGE SYSTEM
(403: the system object always exists, so "not found" would only mislead)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamshield.server import security_port as port
from streamshield.server.errors import Forbidden, Invalid, unseen

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


def require_visible(security: Any, session: Session, kind: str, name: str) -> None:
    """404 unless the caller holds VIEW OBJECT on ``kind`` ``name``."""
    if kind not in port.KINDS:
        raise Invalid(f"kind must be one of {', '.join(port.KINDS)}")
    if not port.check(security, session, "VIEW OBJECT", kind, name):
        raise unseen(kind)


def require_change_system(security: Any, session: Session) -> None:
    """403 without CHANGE SYSTEM on the system."""
    if not port.check(security, session, "CHANGE SYSTEM", "system", "system"):
        raise Forbidden("CHANGE SYSTEM on system is needed")

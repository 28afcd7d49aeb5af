"""What a user name may be and how a session token is stored: shared by password
logins (:mod:`~.security`) and token sessions (:mod:`~.federation`)."""

from __future__ import annotations

import hashlib
import re

USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,199}\Z")
"""1-200 letters, digits and ``_ . @ -``, not starting with ``.``, ``@`` or ``-``."""


def token_hash(token: str) -> str:
    """What the sessions table keeps of a bearer token: its SHA-256 (a fast hash
    suffices for a random 256-bit secret, and for a signed JWT, whose holder already
    has the secret)."""
    return hashlib.sha256(token.encode()).hexdigest()

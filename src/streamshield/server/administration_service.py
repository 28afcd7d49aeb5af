"""Sessions, grants and system settings behind the API.

What these change reaches the running queries and subscriptions at once, not at their
next batch: a logout ends that session's subscriptions (``session_ended``), a grant or a
revocation re-derives every query's and subscriber's rights (``rights_changed``: a query
whose owner lost READ on an input stops, and starts again when it is given back). The
catalog decides who may do what; this layer adds the API's gates and those hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.access_gates import require_change_system
from streamshield.server.errors import Invalid
from streamshield.server.oidc_tokens import TokenVerifier, looks_like_jwt
from streamshield.server.system_settings import SettingsRejected, validated

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class AdministrationService:
    """Logins, grants and settings, as methods taking the caller's session."""

    def __init__(
        self,
        security: Any,
        session_ended: Callable[[], object],
        rights_changed: Callable[[], object],
    ) -> None:
        self.security = security
        self._session_ended, self._rights_changed = session_ended, rights_changed

    def login(self, user: str, password: str, roles: list[str], client: str) -> Session:
        return port.login(self.security, user, password, roles, client)

    tokens: TokenVerifier | None = None
    """The OpenID Connect issuers' token checks (``serve``'s ``[oidc]``); None: only
    the server's own session tokens are accepted."""

    def session(self, token: str, client: str | None = None) -> Session:
        """The session of a bearer token: one of ours, or a JWT of a configured issuer
        (:func:`.security_port.token_session`), which may open one."""
        if self.tokens is not None and looks_like_jwt(token):
            return port.token_session(self.security, self.tokens, token, client)
        return port.session(self.security, token)

    def logout(self, token: str) -> None:
        port.logout(self.security, token)
        self._session_ended()

    def grant(self, session: Session, body: dict, revoke: bool = False) -> None:
        """The catalog decides (owner, CHANGE PERM or grant option; 404 for unseen objects)."""
        port.grant(self.security, session, body, revoke)
        self._rights_changed()

    def settings(self, session: Session) -> dict:
        require_change_system(self.security, session)
        return port.settings(self.security)

    def set_settings(self, session: Session, values: dict) -> dict:
        """CHANGE SYSTEM first; then the whole change is validated against the settings'
        schema before any key is stored, so one bad key stores nothing."""
        require_change_system(self.security, session)
        try:
            values = validated(values)
        except SettingsRejected as err:
            raise Invalid(f"settings refused: {err}", codes.SETTINGS_INVALID) from None
        for key, value in values.items():
            port.set_setting(self.security, session, key, value)
        return port.settings(self.security)

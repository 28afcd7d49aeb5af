"""``GET``/``PUT /system/settings``: the server-wide settings (CHANGE SYSTEM only).

What a setting may hold is checked by :mod:`streamshield.server.system_settings`
before anything changes; a refused change is a 422 naming the key (``settings_invalid``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fastapi import APIRouter

from streamshield.server.auth import Auth
from streamshield.server.models import SettingsBody, SettingsView
from streamshield.server.openapi import AUTHED, errors

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class Settings(Protocol):
    """What the settings routes ask of the server
    (:class:`~streamshield.server.administration_service.AdministrationService`)."""

    def settings(self, session: Session) -> dict: ...

    def set_settings(self, session: Session, values: dict) -> dict: ...


def router(administration: Settings) -> APIRouter:
    """The settings routes of one server."""
    api = APIRouter()

    @api.get("/system/settings", response_model=SettingsView, responses=errors(*AUTHED, 403))
    def settings(who: Auth) -> dict:
        return administration.settings(who.session)

    @api.put("/system/settings", response_model=SettingsView, responses=errors(*AUTHED, 403, 422))
    def set_settings(body: SettingsBody, who: Auth) -> dict:
        return administration.set_settings(who.session, body.values)

    return api

"""The OAuth 2.0 device authorization grant (RFC 8628) against an OpenID Connect issuer:
how ``streamshield client login --oidc-device`` gets a token without a browser here.

The issuer's discovery document names its device and token endpoints; the user opens
the verification URL elsewhere and enters the code shown, while this polls the token
endpoint at the interval the issuer asks (slower when told ``slow_down``) until the
token comes, the user refuses, or the code expires. HTTPS only, checked against the
given CA (or the system's).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx

from streamshield.cli.output import EXIT_SESSION, Failure

GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise Failure(
            f"the issuer answered {answer.status_code} without a JSON object", EXIT_SESSION
        )
    return body


def device_token(
    issuer: str,
    client_id: str,
    *,
    scope: str = "openid",
    ca: str | None = None,
    tell: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    id_token: bool = False,
) -> str:
    """A token from ``issuer`` for ``client_id`` once the user approved the code ``tell``
    shows her: the access token, or the ID token with ``id_token``."""
    if not issuer.startswith("https://"):
        raise Failure("--oidc-device: the issuer must be an https:// URL", EXIT_SESSION)
    context = ssl.create_default_context(cafile=ca)
    with httpx.Client(verify=context, timeout=30) as http:
        try:
            found = _json(http.get(issuer.rstrip("/") + "/.well-known/openid-configuration"))
            device, token = found.get("device_authorization_endpoint"), found.get("token_endpoint")
            if not (isinstance(device, str) and isinstance(token, str)):
                raise Failure("the issuer offers no device authorization", EXIT_SESSION)
            if not (device.startswith("https://") and token.startswith("https://")):
                raise Failure("the issuer's endpoints are not https:// URLs", EXIT_SESSION)
            started = _json(http.post(device, data={"client_id": client_id, "scope": scope}))
            if "device_code" not in started:
                raise Failure(
                    f"device authorization refused: {started.get('error', '?')}", EXIT_SESSION
                )
            where = started.get("verification_uri_complete") or started.get("verification_uri")
            tell(f"open {where} and enter the code {started.get('user_code')}")
            interval = float(started.get("interval", 5))
            deadline = time.monotonic() + float(started.get("expires_in", 600))
            form = {
                "grant_type": GRANT,
                "device_code": started["device_code"],
                "client_id": client_id,
            }
            while time.monotonic() < deadline:
                answer = _json(http.post(token, data=form))
                wanted = answer.get("id_token" if id_token else "access_token")
                if isinstance(wanted, str):
                    return wanted
                error = answer.get("error")
                if error == "slow_down":
                    interval += 5
                elif error != "authorization_pending":
                    raise Failure(f"device login refused: {error or 'no token'}", EXIT_SESSION)
                sleep(interval)
        except httpx.HTTPError as err:
            raise Failure(f"cannot reach the issuer: {type(err).__name__}", EXIT_SESSION) from None
    raise Failure("device login: the code expired before it was approved", EXIT_SESSION)

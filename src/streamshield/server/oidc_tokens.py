"""Validation of OpenID Connect bearer tokens (JWT access or ID tokens).

A token is trusted only when every check passes, in this order (each refusal names its
reason, :class:`TokenInvalid`, and nothing else about the token or the keys):

1. three base64url parts whose header and payload are JSON objects ("malformed token");
2. the header's ``alg`` is one the issuer is configured for ("algorithm not allowed"):
   ``none`` and ``HS*`` never are (:mod:`.oidc_settings`), so a token "signed" with the
   issuer's public key as an HMAC secret is refused before any key is looked at;
3. the (unverified) ``iss`` is a configured issuer ("unknown issuer");
4. the header's ``kid`` is among the keys the issuer publishes now ("unknown signing
   key"; :mod:`.jwks` fetches again, rate-limited). Keys given in the token itself
   (``jwk``, ``jku``, ``x5u``) are never used;
5. the signature verifies with that key and algorithm ("bad signature");
6. the claims: ``iss`` and ``aud`` exact ("wrong issuer", "wrong audience"), ``exp``,
   ``nbf`` and ``iat`` within the leeway ("token expired", "token not yet valid",
   "token issued in the future"), every required claim present ("missing claim");
7. a usable user name in the username claim ("no usable user name").

Only then are the claims read for the user and her roles (:func:`.oidc_settings.mapped_roles`).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    ExpiredTokenError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import Key

from streamshield.catalog.federation import TokenIdentity
from streamshield.server.jwks import Fetch, KeySet
from streamshield.server.oidc_settings import (
    ALWAYS_REQUIRED,
    OidcIssuer,
    OidcSettings,
    claim,
    mapped_roles,
)

MAX_TOKEN = 16 * 1024
"""Characters a bearer JWT may have (IdP tokens with many groups stay far below)."""


class TokenInvalid(Exception):
    """A token that is not trusted (:class:`~streamshield.catalog.federation.TokenRefused`
    is one the catalog opens no session for); ``reason`` is safe to show (it says which rule, never
    what the token or the keys hold). ``issuer``: the configured issuer the token
    claimed, once it is known to be one."""

    def __init__(self, reason: str, issuer: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.issuer = reason, issuer


def looks_like_jwt(token: str) -> bool:
    """Our own session tokens are URL-safe base64 without dots; a JWS compact token has
    exactly two."""
    return token.count(".") == 2


def _part(text: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        raise TokenInvalid("malformed token") from None
    if not isinstance(value, dict):
        raise TokenInvalid("malformed token")
    return value


class TokenVerifier:
    """Checks tokens of the configured issuers, each issuer's keys in a :class:`KeySet`."""

    def __init__(
        self,
        settings: OidcSettings,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.keys = {i.issuer: KeySet(i, fetch) for i in settings.issuers}

    def verify(self, token: str) -> TokenIdentity:
        """The identity of a trusted token, or :class:`TokenInvalid`."""
        if len(token) > MAX_TOKEN or not looks_like_jwt(token):
            raise TokenInvalid("malformed token")
        head, body, _signature = token.split(".")
        header, unverified = _part(head), _part(body)
        issuer = self.settings.issuer(unverified.get("iss"))
        if issuer is None:
            raise TokenInvalid("unknown issuer")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in issuer.algorithms:
            raise TokenInvalid("algorithm not allowed", issuer.issuer)
        kid = header.get("kid")
        key = self.keys[issuer.issuer].key(kid if isinstance(kid, str) else None)
        if key is None:
            raise TokenInvalid("unknown signing key", issuer.issuer)
        claims = self._verified(token, key, alg, issuer)
        name = claim(claims, issuer.username_claim)
        if not isinstance(name, str) or not name or not isinstance(claims.get("sub"), str):
            raise TokenInvalid("no usable user name", issuer.issuer)
        return TokenIdentity(
            issuer=issuer.issuer,
            subject=claims["sub"],
            user=name,
            roles=mapped_roles(claims, issuer),
            issued_at=float(claims["iat"]),
            expires_at=float(claims["exp"]) + issuer.leeway_seconds,
            provision=issuer.provision,
            ceiling=issuer.ceiling,
        )

    def _verified(self, token: str, key: Key, alg: str, issuer: OidcIssuer) -> dict[str, Any]:
        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except BadSignatureError:
            raise TokenInvalid("bad signature", issuer.issuer) from None
        except JoseError:
            raise TokenInvalid("malformed token", issuer.issuer) from None
        essential: dict[str, Any] = {name: {"essential": True} for name in ALWAYS_REQUIRED}
        essential.update({name: {"essential": True} for name in issuer.required_claims})
        essential["iss"] = {"essential": True, "value": issuer.issuer}
        essential["aud"] = {"essential": True, "value": issuer.audience}
        rules = jwt.JWTClaimsRegistry(
            now=lambda: int(self.clock()), leeway=issuer.leeway_seconds, **essential
        )
        try:
            rules.validate(decoded.claims)
        except ExpiredTokenError:
            raise TokenInvalid("token expired", issuer.issuer) from None
        except MissingClaimError as err:
            raise TokenInvalid(f"missing claim {err.claim}", issuer.issuer) from None
        except ClaimError as err:
            raise TokenInvalid(_claim_reason(err.claim), issuer.issuer) from None
        return dict(decoded.claims)


def _claim_reason(name: str) -> str:
    return {
        "aud": "wrong audience",
        "iss": "wrong issuer",
        "nbf": "token not yet valid",
        "iat": "token issued in the future",
        "exp": "token expired",
    }.get(name, f"invalid claim {name}")

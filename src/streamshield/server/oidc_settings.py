"""The ``[oidc]`` section of ``streamshield serve``: trusted OpenID Connect issuers, and
how a token's claims become a user name and streamshield roles.

Strict like the rest of the settings (:mod:`.settings`): an unknown key, a plain-HTTP
URL or an algorithm that would let a token be forged is refused when the server starts,
with the key named. Only asymmetric signatures are accepted: ``none`` needs no key at
all, and an HMAC (``HS*``) would let anyone holding the issuer's *public* key (which is
published) sign tokens, the classic algorithm-confusion attack.

Pure Python (no Spark, no network): :func:`mapped_roles` and the validation here are
unit-tested on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
)
"""The JWS algorithms an issuer may be trusted with: RSA and ECDSA signatures."""
DEFAULT_ALGORITHMS = ("RS256", "ES256", "PS256")
ALWAYS_REQUIRED = ("exp", "iat", "sub")
"""Claims every token must carry: an expiry (a token without one would never end her
sessions), its issue time (which of two tokens is newer decides whose roles count) and
the subject (the identity a user is bound to)."""


class OidcIssuer(BaseModel):
    """One trusted issuer (an IdP realm): where its keys are, what its tokens must say,
    and how their claims map to a user and her roles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str = Field(description="The issuer URL, exactly as tokens carry it in 'iss'.")
    audience: str = Field(description="The 'aud' value tokens must carry (this server's id).")
    jwks_url: str | None = Field(
        None,
        description="The issuer's JWKS URL (default: jwks_uri of "
        "<issuer>/.well-known/openid-configuration).",
    )
    algorithms: tuple[str, ...] = Field(
        DEFAULT_ALGORITHMS, description="JWS algorithms accepted (asymmetric only)."
    )
    leeway_seconds: int = Field(
        60, ge=0, le=600, description="Clock skew tolerated on exp, nbf and iat."
    )
    required_claims: tuple[str, ...] = Field(
        (), description="Claims a token must carry besides exp, iat, sub, iss and aud."
    )
    username_claim: str = Field(
        "preferred_username",
        description="The claim naming the streamshield user (one the IdP controls).",
    )
    roles_claim: str = Field(
        "groups",
        description="The claim whose values map to roles; a dotted path reaches into "
        "objects (Keycloak: realm_access.roles).",
    )
    role_mapping: dict[str, tuple[str, ...]] = Field(
        description="Claim value -> streamshield roles; values not listed give none."
    )
    provision: bool = Field(
        False,
        description="Create an unknown user at her first valid token (else she is "
        "refused until an administrator creates her).",
    )
    ca_file: Path | None = Field(
        None, description="CA bundle (PEM) the IdP's TLS certificate is checked against."
    )
    jwks_cache_seconds: float = Field(
        300.0, gt=0, le=86400, description="Seconds the fetched JWKS is used before a refetch."
    )
    jwks_refresh_seconds: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="Least seconds between two fetches caused by a token naming an "
        "unknown key id (a flood of made-up kids cannot hammer the IdP).",
    )

    @field_validator("issuer", "jwks_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("https://"):
            raise ValueError("must be an https:// URL (keys and tokens over TLS only)")
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("name at least one algorithm")
        refused = sorted(set(value) - ASYMMETRIC)
        if refused:
            raise ValueError(
                f"algorithms {refused} refused: only RSA and ECDSA signatures "
                f"({', '.join(sorted(ASYMMETRIC))}); never none or HMAC"
            )
        return value

    @field_validator("role_mapping")
    @classmethod
    def _mapping(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if not value:
            raise ValueError("map at least one claim value to roles")
        return value

    @field_validator("username_claim", "roles_claim")
    @classmethod
    def _claim_name(cls, value: str) -> str:
        if not value or any(not part for part in value.split(".")):
            raise ValueError("must name a claim")
        return value

    @property
    def ceiling(self) -> frozenset[str]:
        """Every role the mapping can give: what a provisioned user is made to hold."""
        return frozenset(role for roles in self.role_mapping.values() for role in roles)

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"


class OidcSettings(BaseModel):
    """``[oidc]``: the trusted issuers (``[[oidc.issuers]]`` in TOML); none: only
    passwords."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuers: tuple[OidcIssuer, ...] = ()

    @model_validator(mode="after")
    def _distinct(self) -> OidcSettings:
        names = [issuer.issuer for issuer in self.issuers]
        if len(names) != len(set(names)):
            raise ValueError("an issuer is listed twice")
        return self

    def issuer(self, name: object) -> OidcIssuer | None:
        """The configured issuer whose URL is exactly ``name`` (None: not trusted)."""
        return next((i for i in self.issuers if i.issuer == name), None)


def claim(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at a dotted ``path`` (None when any step is missing or not an object)."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def mapped_roles(claims: Mapping[str, Any], issuer: OidcIssuer) -> frozenset[str]:
    """The streamshield roles ``claims`` give through the issuer's mapping: the union of
    the roles mapped from each value of the roles claim (a string or a list of strings;
    anything else, and any value not in the mapping, gives nothing)."""
    values = claim(claims, issuer.roles_claim)
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return frozenset()
    return frozenset(
        role
        for value in values
        if isinstance(value, str)
        for role in issuer.role_mapping.get(value, ())
    )


def unknown_mapped_roles(settings: OidcSettings, known: Iterable[str]) -> list[str]:
    """Roles the issuers' mappings name that the catalog does not have (``serve``
    refuses to start with any: a typo would silently give nobody that role)."""
    have = set(known)
    return sorted({role for issuer in settings.issuers for role in issuer.ceiling} - have)

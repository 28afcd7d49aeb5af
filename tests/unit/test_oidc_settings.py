"""The ``[oidc]`` settings, the claim -> roles mapping and the JWKS cache, without Spark
or a network: what a configuration may say, which roles a token's claims give, and how
often an issuer is asked for its keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from joserfc.jwk import ECKey, OctKey, RSAKey
from pydantic import ValidationError

from streamshield.server.jwks import FetchFailed, KeySet
from streamshield.server.oidc_settings import (
    OidcIssuer,
    OidcSettings,
    mapped_roles,
    unknown_mapped_roles,
)
from streamshield.server.settings import ConfigError, load

ISSUER = "https://idp.test/realms/hospital"
BASE = {"issuer": ISSUER, "audience": "streamshield", "role_mapping": {"nurses": ["NURSE"]}}


def _issuer(**changes: object) -> OidcIssuer:
    return OidcIssuer.model_validate({**BASE, **changes})


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"issuer": "http://idp.test/realms/hospital"}, "https://"),
        ({"jwks_url": "http://idp.test/certs"}, "https://"),
        ({"algorithms": ["HS256"]}, "never none or HMAC"),
        ({"algorithms": ["RS256", "none"]}, "never none or HMAC"),
        ({"algorithms": []}, "at least one algorithm"),
        ({"role_mapping": {}}, "at least one claim value"),
        ({"roles_claim": "realm_access..roles"}, "must name a claim"),
        ({"leeway_seconds": 3600}, "less than or equal to 600"),
        ({"colour": "blue"}, "Extra inputs are not permitted"),
    ],
)
def test_an_unsafe_or_mistyped_issuer_is_refused(changes: dict, said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _issuer(**changes)
    assert said in str(refused.value)


def test_defaults_are_asymmetric_and_deny_unknown_users() -> None:
    issuer = _issuer()
    assert issuer.algorithms == ("RS256", "ES256", "PS256")
    assert issuer.provision is False and issuer.username_claim == "preferred_username"
    assert issuer.discovery_url == f"{ISSUER}/.well-known/openid-configuration"
    with pytest.raises(ValidationError, match="listed twice"):
        OidcSettings(issuers=(issuer, issuer))
    assert OidcSettings(issuers=(issuer,)).issuer(ISSUER) is issuer
    assert OidcSettings(issuers=(issuer,)).issuer(ISSUER + "/") is None  # exact only


def test_the_toml_section_loads_and_a_bad_key_is_named(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        "[[oidc.issuers]]\n"
        f'issuer = "{ISSUER}"\n'
        'audience = "streamshield"\n'
        'roles_claim = "realm_access.roles"\n'
        "provision = true\n"
        '[oidc.issuers.role_mapping]\nnurses = ["NURSE"]\ndoctors = ["DOCTOR", "NURSE"]\n'
    )
    settings = load({}, good)
    (issuer,) = settings.oidc.issuers
    assert issuer.ceiling == {"NURSE", "DOCTOR"} and issuer.provision
    bad = tmp_path / "bad.toml"
    bad.write_text(
        good.read_text().replace('audience = "streamshield"\n', 'algorithms = ["HS256"]\n')
    )
    with pytest.raises(ConfigError) as refused:
        load({}, bad)
    message = str(refused.value)
    assert "oidc.issuers.0.algorithms" in message and "oidc.issuers.0.audience" in message


def test_claim_values_map_to_roles_and_nothing_else_does() -> None:
    issuer = _issuer(
        role_mapping={"nurses": ["NURSE"], "doctors": ["DOCTOR", "NURSE"], "ward-7": ["W7"]}
    )
    assert mapped_roles({"groups": ["doctors", "ward-7"]}, issuer) == {"DOCTOR", "NURSE", "W7"}
    assert mapped_roles({"groups": "nurses"}, issuer) == {"NURSE"}  # one value as a string
    assert mapped_roles({"groups": ["admins", "NURSE", "Nurses"]}, issuer) == set()  # exact
    for odd in (None, 7, {"nurses": True}, [["nurses"]], [None, 3]):
        assert mapped_roles({"groups": odd}, issuer) == set()
    assert mapped_roles({}, issuer) == set()
    keycloak = _issuer(roles_claim="realm_access.roles", role_mapping={"nurses": ["NURSE"]})
    assert mapped_roles({"realm_access": {"roles": ["nurses"]}}, keycloak) == {"NURSE"}
    assert mapped_roles({"realm_access": ["nurses"]}, keycloak) == set()
    assert mapped_roles({"groups": ["nurses"]}, keycloak) == set()
    settings = OidcSettings(issuers=(issuer,))
    assert unknown_mapped_roles(settings, ["NURSE", "DOCTOR"]) == ["W7"]


class FakeIssuer:
    """A JWKS endpoint in memory: what it publishes now, how often it was asked."""

    def __init__(self) -> None:
        self.keys = {"a": RSAKey.generate_key(2048, parameters={"kid": "a"})}
        self.fetches = 0
        self.down = False

    def fetch(self, url: str) -> dict:
        assert url == "https://idp.test/certs"
        self.fetches += 1
        if self.down:
            raise FetchFailed("connection refused")
        return {"keys": [key.as_dict(private=False) for key in self.keys.values()]}


def test_the_key_set_refetches_rarely_and_drops_retired_keys() -> None:
    idp, now = FakeIssuer(), [1000.0]
    issuer = _issuer(
        jwks_url="https://idp.test/certs", jwks_cache_seconds=300, jwks_refresh_seconds=30
    )
    keys = KeySet(issuer, idp.fetch, clock=lambda: now[0])
    assert keys.key("a") is not None and idp.fetches == 1
    for n in range(100):  # a flood of made-up ids: no fetch within the interval
        assert keys.key(f"bogus-{n}") is None
    assert idp.fetches == 1
    now[0] += 30
    assert keys.key("bogus") is None and idp.fetches == 2  # one more, then quiet again
    assert keys.key("bogus-2") is None and idp.fetches == 2

    idp.keys = {"b": ECKey.generate_key("P-256", parameters={"kid": "b"})}  # rotated
    now[0] += 30
    assert keys.key("b") is not None and idp.fetches == 3
    assert keys.key("a") is None  # retired: gone with the fetch that brought b

    idp.down = True
    now[0] += 300  # stale: refetched, fails, the set held is kept
    assert keys.key("b") is not None and idp.fetches == 4


def test_symmetric_and_encryption_keys_are_never_used() -> None:
    secret = OctKey.generate_key(256, parameters={"kid": "s"}).as_dict(private=True)
    encrypting = RSAKey.generate_key(2048, parameters={"kid": "e", "use": "enc"})
    document = {"keys": [secret, encrypting.as_dict(private=False), {"kty": "RSA", "kid": "x"}]}
    issuer = _issuer(jwks_url="https://idp.test/certs")
    keys = KeySet(issuer, lambda _url: document)
    assert keys.key("s") is None and keys.key("e") is None and keys.key("x") is None
    private = RSAKey.generate_key(2048, parameters={"kid": "p"})
    keys = KeySet(issuer, lambda _url: {"keys": [private.as_dict(private=True)]})
    found = keys.key("p")
    assert found is not None and not found.is_private  # verification only

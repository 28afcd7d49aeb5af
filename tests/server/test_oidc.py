"""Single sign-on against a real issuer: tokens of a TLS JWKS endpoint the test runs.

One server (password users joe, ward, al, dave) trusts two realms of the test issuer
(:mod:`tests.server.oidc_issuer`): ``open`` provisions unknown users, ``closed`` does
not. Every forged, stale or misdirected token is refused with 401, its reason, and an
audit entry; a valid one subscribes and gets rows; a newer token with fewer groups
narrows the older token's session and ends the subscription it no longer allows; the
token's expiry ends its subscription; a rotated key is used and the retired one refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from joserfc import jwt
from joserfc.jwk import RSAKey

from streamshield.catalog.refusal_budget import RefusalBudget
from streamshield.cli import main
from streamshield.server.oidc_settings import OidcIssuer, OidcSettings
from streamshield.server.oidc_tokens import TokenVerifier
from tests.server.conftest import (
    Server,
    Subscriber,
    grant,
    ok,
    poll,
    start_server,
    stop_server,
    tuple_line,
)
from tests.server.oidc_issuer import AUDIENCE, Issuer

pytestmark = pytest.mark.spark

USERS = {"joe": ["ADMIN"], "ward": ["INFO_PROVIDER"], "al": ["CUSTOMER1"], "dave": ["CUSTOMER1"]}
MAPPING = {"customers-1": ("CUSTOMER1",), "customers-2": ("CUSTOMER2",)}
BOTH = ["customers-1", "customers-2"]
REFRESH = 0.5  # jwks_refresh_seconds: least time between two fetches for unknown kids


def _realm(idp: Issuer, realm: str, provision: bool) -> OidcIssuer:
    return OidcIssuer(
        issuer=idp.url(realm),
        audience=AUDIENCE,
        leeway_seconds=1,
        role_mapping=MAPPING,
        provision=provision,
        ca_file=idp.ca,
        jwks_refresh_seconds=REFRESH,
    )


@pytest.fixture(scope="module")
def idp(tmp_path_factory) -> Iterator[Issuer]:
    issuer = Issuer(tmp_path_factory.mktemp("idp"))
    yield issuer
    issuer.stop()


@pytest.fixture(scope="module")
def server(spark, idp, tmp_path_factory) -> Iterator[Server]:
    started = start_server(tmp_path_factory.mktemp("sso"), spark, USERS, session_ttl=600.0)
    settings = OidcSettings(issuers=(_realm(idp, "open", True), _realm(idp, "closed", False)))
    started.service.administration.tokens = TokenVerifier(settings)
    yield started
    stop_server(started)


@pytest.fixture(scope="module")
def world(server: Server) -> Server:
    """Stream ``vitals`` (readable by CUSTOMER1 and 2), Al's query ``mine`` whose output
    CUSTOMER2 may subscribe to, and one sp letting both customers see every row."""
    # every refusal of this module's attack tests is audited: none is left to the
    # per-address budget (test_a_flood_of_bad_tokens_is_audited_within_a_budget)
    server.service.security.refusals = RefusalBudget(per_window=10**6)
    joe = server.login("joe", ["ADMIN"])
    schema = {"name": "v", "attributes": [["id", "bigint"], ["hr", "bigint"]], "tid": "id"}
    ok(joe.post("/schemas", json=schema), 201)
    ok(joe.post("/streams", json={"name": "vitals", "schema": "v"}), 201)
    for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
        grant(joe, permission, "stream", "vitals", "INFO_PROVIDER")
    for role in ("CUSTOMER1", "CUSTOMER2"):
        for permission in ("VIEW OBJECT", "READ TUPLE"):
            grant(joe, permission, "stream", "vitals", role)
        grant(joe, "VIEW CATALOG", "system", "system", role)
    grant(joe, "ADD", "system", "system", "CUSTOMER1")
    al = server.login("al", ["CUSTOMER1"])
    ok(al.post("/queries", json={"name": "mine", "text": "SELECT id, hr FROM vitals"}), 201)
    grant(al, "VIEW OBJECT", "stream", "mine_out", "CUSTOMER2")
    grant(al, "SUBSCRIBE", "stream", "mine_out", "CUSTOMER2")
    sp = {"type": "sp", "stream": "vitals", "provider": "ward", "seq": 1, "ts": 100, "sn": 1}
    sp |= {"sign": "+", "immutable": False}
    sp |= {"ddp": {"streams": "vitals", "tuples": "*", "attributes": "*"}}
    sp |= {"srp": {"roles": "{CUSTOMER1, CUSTOMER2}", "grant_option": False}}
    ok(
        server.login("ward", ["INFO_PROVIDER"]).post(
            "/streams/vitals/elements", content=json.dumps(sp)
        )
    )
    return server


_next_tid = iter(range(1, 10**6))


def _append(server: Server, count: int) -> None:
    ward = server.login("ward", ["INFO_PROVIDER"])
    lines = []
    for _ in range(count):
        tid = next(_next_tid)
        lines.append(tuple_line("vitals", "ward", 10 + tid, tid, {"id": tid, "hr": 60}))
    ok(ward.post("/streams/vitals/elements", content="\n".join(lines)))


_admins: dict[str, httpx.Client] = {}


def _joe(server: Server) -> httpx.Client:
    """Joe's one session for the module (each password login costs an argon2 check)."""
    if server.url not in _admins:
        _admins[server.url] = server.login("joe", ["ADMIN"])
    return _admins[server.url]


def _last_audit_id(server: Server) -> int:
    entries = ok(_joe(server).get("/audit", params={"limit": 1}))["entries"]
    return entries[0]["id"] if entries else 0


def _audited(server: Server, after: int, **detail: object) -> dict:
    """The newest audit entry after id ``after`` whose detail has ``detail``."""
    entries = ok(_joe(server).get("/audit", params={"limit": 50}))["entries"]
    for entry in entries:
        if entry["id"] > after and all(entry["detail"].get(k) == v for k, v in detail.items()):
            return entry
    raise AssertionError(f"no audit entry with {detail}: {entries[:5]}")


def _refused(server: Server, token: str, reason: str) -> dict:
    """The token is answered 401 with ``reason`` and the refusal is audited."""
    before = _last_audit_id(server)
    with server.client(token) as client:
        answer = client.get("/me")
    assert answer.status_code == 401, answer.text
    assert answer.json() == {"error": "unauthorized", "message": f"token refused: {reason}"}
    entry = _audited(server, before, method="oidc", reason=reason)
    assert entry["action"] == "login" and entry["outcome"] in ("failed", "denied"), entry
    return entry


def _me(server: Server, token: str) -> dict:
    with server.client(token) as client:
        return ok(client.get("/me"))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hs256(idp: Issuer, claims: dict) -> str:
    """Algorithm confusion: HS256 "signed" with the issuer's public RSA key as secret."""
    public = idp.keys["rsa-1"].get_op_key("verify")
    secret = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = _b64(json.dumps({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def _claims(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def test_every_attack_token_is_refused_with_its_reason_and_audited(world, idp) -> None:
    server = world
    now = int(time.time())
    good = idp.token("mallet", BOTH)
    head, body, signature = good.split(".")
    escalated = _b64(json.dumps({**_claims(good), "preferred_username": "joe"}).encode())
    forger = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})  # published nowhere
    forged = jwt.encode({"alg": "RS256", "kid": "rsa-1"}, _claims(good), forger, ["RS256"])
    none = f"{_b64(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{body}."
    cases = [
        (idp.token("mallet", BOTH, lifetime=-30), "token expired"),
        (idp.token("mallet", BOTH, nbf=now + 120), "token not yet valid"),
        (idp.token("mallet", BOTH, iat=now + 120), "token issued in the future"),
        (idp.token("mallet", BOTH, aud="another-service"), "wrong audience"),
        (idp.token("mallet", BOTH, iss="https://127.0.0.1:1/realms/open"), "unknown issuer"),
        (idp.token("mallet", BOTH, kid="rsa-2"), "unknown signing key"),  # not published
        (_hs256(idp, _claims(good)), "algorithm not allowed"),
        (none, "algorithm not allowed"),
        (f"{head}.{escalated}.{signature}", "bad signature"),
        (forged, "bad signature"),
        (idp.token("mallet", BOTH, exp=None), "missing claim exp"),
        ("a.b.c", "malformed token"),
    ]
    for token, reason in cases:
        _refused(server, token, reason)
    ok(_joe(server).get("/users/mallet"), 404)  # never provisioned


def test_a_flood_of_bad_tokens_is_audited_within_a_budget(world, idp) -> None:
    """Each bad token is refused, but one address writes at most its budget of audit
    entries a window; the next window's first entry counts the ones not written."""
    server = world
    clock = [0.0]
    kept = server.service.security.refusals
    server.service.security.refusals = RefusalBudget(3, 60, clock=lambda: clock[0])
    try:
        before = _last_audit_id(server)
        bad = idp.token("mallet", BOTH, aud="another-service")
        for _ in range(8):
            with server.client(bad) as client:
                assert client.get("/me").status_code == 401
        entries = ok(_joe(server).get("/audit", params={"limit": 50}))["entries"]
        written = [e for e in entries if e["id"] > before and e["detail"].get("method") == "oidc"]
        assert len(written) == 3 and all("suppressed" not in e["detail"] for e in written)
        clock[0] = 60.0
        entry = _refused(server, bad, "wrong audience")
        assert entry["detail"]["suppressed"] == 5
    finally:
        server.service.security.refusals = kept


def test_a_valid_token_subscribes_then_a_newer_one_with_fewer_groups_narrows_it(world, idp) -> None:
    server = world
    before = _last_audit_id(server)
    first = idp.token("carol", BOTH)
    assert _me(server, first)["user"] == "carol"
    assert _me(server, first)["roles"] == ["CUSTOMER1", "CUSTOMER2"]
    created = _audited(server, before, provisioned_by=idp.url("open"))
    assert created["action"] == "create_user" and created["detail"]["user"] == "carol"
    _audited(server, before, method="oidc", roles=["CUSTOMER1", "CUSTOMER2"])

    subscriber = Subscriber(server.client(first), "mine_out")  # needs CUSTOMER2
    assert subscriber.status == 200
    _append(server, 3)
    poll(lambda: len(subscriber.rows()) >= 3, timeout=60)

    # The IdP took her out of customers-2: her next token narrows the first one too.
    newer = idp.token("carol", ["customers-1"], iat=_claims(first)["iat"] + 1)
    assert _me(server, newer)["roles"] == ["CUSTOMER1"]
    assert _me(server, first)["roles"] == ["CUSTOMER1"]
    poll(lambda: any(event == "closed" for event, _ in subscriber.events), timeout=30)
    subscriber.close()
    with server.client(first) as client:
        assert client.get("/queries/mine_out/subscribe").status_code == 404  # unseen now
    # An older token presented later gets nothing the newest does not give.
    older = idp.token("carol", BOTH, iat=_claims(first)["iat"] - 1)
    assert _me(server, older)["roles"] == ["CUSTOMER1"]
    # Another IdP account taking her user name is not her.
    _refused(
        server,
        idp.token("carol", BOTH, subject="someone-else"),
        "user name bound to another identity",
    )


def test_the_token_expiry_ends_its_subscription(world, idp) -> None:
    server = world
    short = idp.token("gina", BOTH, lifetime=3)  # + 1 s leeway
    subscriber = Subscriber(server.client(short), "mine_out")
    assert subscriber.status == 200
    poll(lambda: any(event == "closed" for event, _ in subscriber.events), timeout=30)
    subscriber.close()
    _refused(server, short, "token expired")


def test_a_rotated_key_is_used_and_the_retired_one_refused(world, idp) -> None:
    server = world
    old = idp.token("hana", BOTH, kid="rsa-1")
    assert _me(server, old)["user"] == "hana"
    time.sleep(REFRESH)  # the last unknown-kid fetch is old enough to fetch again
    idp.published = {"rsa-2", "ec-1"}  # rsa-1 retired
    try:
        assert _me(server, idp.token("hana", BOTH, kid="rsa-2"))["user"] == "hana"
        _refused(server, old, "unknown signing key")  # its session too
        _refused(server, idp.token("hana", BOTH, kid="rsa-1"), "unknown signing key")
        assert _me(server, idp.token("hana", BOTH, kid="ec-1"))["user"] == "hana"  # ES256

        # Made-up key ids cost the issuer at most one fetch per interval.
        fetched, began = idp.jwks_requests, time.monotonic()
        for n in range(20):
            _made_up_kid_refused(server, n)
        allowed = 1 + int((time.monotonic() - began) / REFRESH) + 1
        assert idp.jwks_requests - fetched <= allowed
    finally:
        idp.published = {"rsa-1", "ec-1"}
        time.sleep(REFRESH)


def _made_up_kid_refused(server: Server, n: int) -> None:
    """A token naming a key id nobody published is refused (no audit lookup: fast)."""
    head = _b64(json.dumps({"alg": "RS256", "kid": f"made-up-{n}"}).encode())
    body = _b64(json.dumps({"iss": server_issuer(server)}).encode())
    with server.client(f"{head}.{body}.AAAA") as client:
        answer = client.get("/me")
    assert answer.status_code == 401
    assert answer.json()["message"] == "token refused: unknown signing key"


def server_issuer(server: Server) -> str:
    tokens = server.service.administration.tokens
    assert tokens is not None
    return tokens.settings.issuers[0].issuer


def test_provisioning_off_refuses_unknown_users_and_roles_stay_within_the_catalog(
    world, idp
) -> None:
    server = world
    _refused(server, idp.token("erin", BOTH, realm="closed"), "unknown user")
    ok(_joe(server).get("/users/erin"), 404)
    # dave exists (password, CUSTOMER1): the IdP's customers-2 gives him nothing more.
    dave = idp.token("dave", BOTH, realm="closed")
    assert _me(server, dave)["roles"] == ["CUSTOMER1"]
    _refused(
        server,
        idp.token("dave", ["customers-2"], realm="closed", iat=_claims(dave)["iat"] + 1),
        "no roles",
    )
    server.login("dave", ["CUSTOMER1"])  # passwords still work


def test_a_disabled_user_is_refused_and_logout_ends_a_token(world, idp) -> None:
    server = world
    token = idp.token("frank", BOTH)
    assert _me(server, token)["user"] == "frank"
    joe = _joe(server)
    ok(joe.post("/users/frank/disable"))
    _refused(server, token, "user disabled")
    _refused(server, idp.token("frank", BOTH), "user disabled")
    ok(joe.post("/users/frank/enable"))

    ivy = idp.token("ivy", BOTH)
    with server.client(ivy) as client:
        ok(client.post("/logout"))
    _refused(server, ivy, "session ended")


def test_cli_logs_in_with_a_token_file_and_the_device_flow(
    world, idp, tmp_path, monkeypatch
) -> None:
    server = world
    monkeypatch.setenv("STREAMSHIELD_HOME", str(tmp_path / "home"))
    token_file = tmp_path / "token"
    token_file.write_text(idp.token("jay", BOTH) + "\n")
    runner = CliRunner()
    common = ["client", "login", "--url", server.url, "--ca", str(server.cert)]
    done = runner.invoke(main, [*common, "--token-file", str(token_file)])
    assert done.exit_code == 0, done.output
    assert "logged in as jay with roles CUSTOMER1, CUSTOMER2" in done.output
    shown = runner.invoke(main, ["client", "catalog", "--output", "json"])
    assert shown.exit_code == 0 and "vitals" in shown.output, shown.output

    expired = tmp_path / "expired"
    expired.write_text(idp.token("jay", BOTH, lifetime=-30))
    refused = runner.invoke(main, [*common, "--token-file", str(expired)])
    assert refused.exit_code != 0 and "token refused: token expired" in refused.output

    idp.device_token, idp.device_polls = idp.token("kim", BOTH), 0
    device = [
        "--oidc-device",
        idp.url("open"),
        "--client-id",
        "streamshield-cli",
        "--oidc-ca",
        str(idp.ca),
    ]
    done = runner.invoke(main, [*common, *device])
    assert done.exit_code == 0, done.output
    assert "ABCD-EFGH" in done.output and "logged in as kim" in done.output
    assert idp.device_polls == 2  # pending once, then the token

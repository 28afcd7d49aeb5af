"""API fuzzing with schemathesis against the served ``/openapi.json`` of a real server.

One server over TLS for the module (like every server test). Schemathesis generates
requests from the OpenAPI document and checks each response (:data:`CHECKS`): no 5xx,
a documented status code, the documented media type, body and headers, and schema-
violating requests refused. It runs as two callers:

* ``joe``, an administrator (CHANGE SYSTEM): every route can succeed;
* ``mallory``, an ordinary user with few rights (the catalog, a stream of her own, ADD):
  besides the checks above, no response to her may contain :data:`CANARY`, planted in
  what she may not read (another user's stream: its name and values; a query: its name
  and text).

Stateless mode fuzzes every operation on its own, with schema-valid and schema-violating
examples; stateful mode runs scenarios of linked calls through the document's OpenAPI
links (create, then use, then remove: schemas -> streams -> their routes, queries ->
show, rights, explain, start, stop, delete; users and roles -> their routes). The
``/connectors/`` routes have no links: stateless mode fuzzes them, and in the stateful
walk (derandomized) they would only crowd out the linked scenarios it is there for.

Constrained so that the fuzzer cannot break its own run (:func:`_constrained`):
``POST /logout`` runs with a throwaway session (it would end the fuzzer's own); the
routes that change a user (password, roles, disable, enable, clearance) never target the
module's users but ``victim``, and hierarchy edits never the module's roles but
``FUZZ_ROLE``; the canary's query is never stopped or removed; failed
logins are not throttled on this server (the fuzzer's wrong passwords would lock out its
own logins from loopback). ``GET /queries/{name}/subscribe`` and ``GET
/patterns/{name}/subscribe`` are not fuzzed: they are server-sent-event streams that do
not end, and schemathesis reads bodies whole; the canary test subscribes by hand.

:data:`EXAMPLES` per operation and per stateful run: 8 in the suite with a fixed seed;
``STREAMSHIELD_FUZZ_EXAMPLES=500`` for a nightly run, which also draws fresh seeds.

The tests after the fuzzers are the regression tests of the bugs it found, each named
after what it was.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import hypothesis
import hypothesis.strategies as st
import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis.errors import Flaky
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from streamshield.catalog.throttle import ThrottlePolicy
from tests.server.conftest import (
    PASSWORD,
    ROLES,
    Server,
    sp_line,
    start_server,
    stop_server,
    tuple_line,
)

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("STREAMSHIELD_FUZZ_EXAMPLES", "8"))
"""Hypothesis examples per operation (stateless) and scenarios per caller (stateful)."""
NIGHTLY = "STREAMSHIELD_FUZZ_EXAMPLES" in os.environ
STEPS = 10
"""Calls per stateful scenario at most."""

CANARY = "zqcanary5e1f"
"""Planted in what mallory may not read; no response to her may contain it."""
USERS = {
    "joe": ["ADMIN"],
    "ed": ["INFO_PROVIDER"],
    "al": ["CUSTOMER1"],
    "mallory": ["OTHER"],
    "victim": ["CUSTOMER2"],
    "throwaway": ["CUSTOMER2"],
}
PROTECTED_USERS = frozenset(USERS) - {"victim"}
PROTECTED_ROLES = frozenset(ROLES)
"""Hierarchy edits on these go to ``FUZZ_ROLE``: a junior added to OTHER would give
mallory rights the canary test relies on her not having."""
SECRET_STREAM = f"vault_{CANARY}"
SECRET_QUERY = f"secret_{CANARY}"
VALID_QUERY = "SELECT id, note FROM mallorys"
"""The text of every stateful registration: random text never registers, so the chain
register, start, stop, remove would never run on a real query."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]
"""Schemathesis' checks of the contract. Not ``positive_data_acceptance``: a request
valid by the schema is still refused (a documented 422 or 403) by rules the schema cannot
express (the SQL gate, the password policy, the caller's rights)."""

REFUSALS = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
"""What counts as refusing a schema-violating request: schemathesis' default and 413
(an oversized body is refused before it is parsed)."""

SETTINGS = hypothesis.settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not NIGHTLY,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)
"""No shrinking: every shrink step is another request to a server whose state has moved
on, so it costs time and rarely yields a smaller case; schemathesis' report of the
failing request (with its ``curl`` line) is what one needs."""

# The elements route takes JSON Lines: text on the wire (its schema is a string).
schemathesis.serializer.alias("application/x-ndjson", "text/plain")


def _grant(client, permission: str, kind: str, obj: str, role: str) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role}
    answer = client.post("/grants", json=body)
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def fuzz_server(spark, tmp_path_factory) -> Any:
    """A server with the canary planted and failed logins effectively unthrottled."""
    root = tmp_path_factory.mktemp("fuzz")
    throttle = ThrottlePolicy(free_failures=10**6, window=1.0, base_delay=1.0, max_delay=1.0)
    server = start_server(root, spark, USERS, throttle=throttle, session_ttl=3600.0)
    try:
        _plant(server)
        yield server
    finally:
        stop_server(server)


def _plant(server: Server) -> None:
    """Ed's stream readable by CUSTOMER1 only, with canary values, and Al's running
    query over it quoting the canary; mallory gets the catalog, ``mallorys`` and ADD."""
    joe = server.login("joe", ["ADMIN"])
    schema = {
        "name": "notes",
        "attributes": [["id", "bigint"], ["note", "string"], ["ts", "bigint"]],
        "tid": "id",
        "event_time": "ts",
    }
    assert joe.post("/schemas", json=schema).status_code == 201
    assert joe.post("/roles", json={"name": "FUZZ_ROLE"}).status_code == 201
    for stream in (SECRET_STREAM, "mallorys"):
        answer = joe.post("/streams", json={"name": stream, "schema": "notes"})
        assert answer.status_code == 201, answer.text
    for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
        _grant(joe, permission, "stream", SECRET_STREAM, "INFO_PROVIDER")
    for permission in ("VIEW OBJECT", "READ TUPLE"):
        _grant(joe, permission, "stream", SECRET_STREAM, "CUSTOMER1")
    for role in ("INFO_PROVIDER", "CUSTOMER1", "OTHER"):
        _grant(joe, "VIEW CATALOG", "system", "system", role)
    for role in ("CUSTOMER1", "OTHER"):
        _grant(joe, "ADD", "system", "system", role)
    for permission in ("VIEW OBJECT", "READ TUPLE", "WRITE", "INJECT SP"):
        _grant(joe, permission, "stream", "mallorys", "OTHER")
    ed = server.login("ed", ["INFO_PROVIDER"])
    lines = [sp_line(SECRET_STREAM, "ed", 1, "{CUSTOMER1}")] + [
        tuple_line(SECRET_STREAM, "ed", 1 + i, i, {"id": i, "note": f"{CANARY}-{i}", "ts": i})
        for i in range(1, 4)
    ]
    answer = ed.post(f"/streams/{SECRET_STREAM}/elements", content="\n".join(lines))
    assert answer.status_code == 200 and answer.json()["accepted"] == 4, answer.text
    al = server.login("al", ["CUSTOMER1"])
    text = f"SELECT id, note FROM {SECRET_STREAM} WHERE note <> '{CANARY}-0'"
    answer = al.post("/queries", json={"name": SECRET_QUERY, "text": text})
    assert answer.status_code == 201, answer.text
    assert al.post(f"/queries/{SECRET_QUERY}/start").status_code == 200


@pytest.fixture(scope="module")
def api_schema(fuzz_server) -> Any:
    """The served OpenAPI document, fetched over TLS, less the SSE route."""
    config = schemathesis.Config.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}}}
    )
    return schemathesis.openapi.from_url(
        f"{fuzz_server.url}/openapi.json", config=config, verify=str(fuzz_server.cert)
    ).exclude(path=["/queries/{name}/subscribe", "/patterns/{name}/subscribe"])


@pytest.fixture(scope="module")
def callers(fuzz_server) -> dict[str, str]:
    """A session token per fuzzing caller, for the whole module."""
    return {name: _token(fuzz_server, name) for name in ("joe", "mallory")}


def _token(server: Server, user: str) -> str:
    with server.client() as anonymous:
        answer = anonymous.post(
            "/login", json={"user": user, "password": PASSWORD, "roles": USERS[user]}
        )
    assert answer.status_code == 200, answer.text
    return answer.json()["token"]


def _constrained(case: Any, server: Server, token: str) -> dict[str, Any]:
    """The call's keyword arguments, the operations that would break the run
    redirected (module docstring)."""
    label = f"{case.method.upper()} {case.path}"
    if label == "POST /logout":
        token = _token(server, "throwaway")
    names = case.path_parameters or {}
    changes_a_user = case.path.startswith("/users/{name}") and case.method.upper() != "GET"
    if changes_a_user and names.get("name") in PROTECTED_USERS:
        names["name"] = "victim"
    if case.path.startswith("/roles/{name}") and names.get("name") in PROTECTED_ROLES:
        names["name"] = "FUZZ_ROLE"
    if names.get("name") == SECRET_QUERY and label in (
        "DELETE /queries/{name}",
        "POST /queries/{name}/stop",
    ):
        names["name"] = f"missing_{uuid.uuid4().hex[:8]}"
    return {
        "headers": {"Authorization": f"Bearer {token}"},
        "verify": str(server.cert),
        "timeout": 60,
    }


def _no_canary(user: str, response: Any) -> None:
    if user == "mallory":
        assert CANARY not in response.text, "a response to mallory carries the canary"


@contextlib.contextmanager
def _recorded(found: list[str], label: str) -> Iterator[None]:
    """Keeps each failure as it happens: a replay against a server whose state has
    moved on may not reproduce it (Hypothesis then raises ``Flaky`` instead)."""
    try:
        yield
    except (Exception, FailureGroup) as failure:  # FailureGroup: a BaseExceptionGroup
        found.append(f"{label}: {failure}")
        raise


def _run(test: Callable[[], None], found: list[str], label: str) -> None:
    """Runs a Hypothesis test; its failures end up in ``found``. ``Flaky`` alone (a
    replay that went another way because the server changed) is no failure: what failed
    was recorded when it happened, as schemathesis' own runner does."""
    try:
        test()
    except Flaky:
        pass
    except (Exception, FailureGroup) as failure:
        if not found:
            found.append(f"{label}: {failure}")


def _fuzz_operation(
    operation: Any, user: str, server: Server, token: str, calls: Counter
) -> list[str]:
    """Schema-valid and schema-violating examples of one operation; its failures."""
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )
    found: list[str] = []

    @hypothesis.given(case=strategy)
    @SETTINGS
    def fuzz(case: Any) -> None:
        with _recorded(found, operation.label):
            kwargs = _constrained(case, server, token)
            response = case.call(**kwargs)
            calls[operation.label] += 1
            _no_canary(user, response)
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    _run(fuzz, found, operation.label)
    return found[-1:]  # the last one recorded: the failing example Hypothesis replays


# The ordinary user first, so that no change the fuzzer makes as an administrator can
# weaken her test.
@pytest.mark.parametrize("user", ["mallory", "joe"])
def test_stateless(user, api_schema, fuzz_server, callers) -> None:
    """Every operation on its own; all run, then every operation's failure is listed."""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    calls: Counter = Counter()
    token = callers[user]
    found = [f for op in operations for f in _fuzz_operation(op, user, fuzz_server, token, calls)]
    print(f"stateless {user}: {calls.total()} requests over {len(calls)} operations")  # -s
    assert not found, "\n\n".join(found)
    assert len(operations) >= 50
    assert {op.label for op in operations} == set(calls), "an operation was never called"


@pytest.mark.parametrize("user", ["mallory", "joe"])
def test_stateful(user, api_schema, fuzz_server, callers) -> None:
    """Scenarios of linked calls; at least one registers a query and then uses it."""
    seen: Counter = Counter()
    found: list[str] = []

    linked = api_schema.exclude(path_regex="^/connectors/")  # no links (see the module)

    class Machine(linked.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            # A schema-violating case is left as generated: made valid here, its
            # acceptance would be reported as "schema-violating request accepted".
            meta = getattr(case, "meta", None)
            negative = meta is not None and meta.generation.mode == GenerationMode.NEGATIVE
            query = case.method == "POST" and case.path == "/queries"
            if query and not negative and isinstance(case.body, dict):
                case.body["text"] = VALID_QUERY

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return _constrained(case, fuzz_server, callers[user])

        def after_call(self, response: Any, case: Any) -> None:
            seen[(f"{case.method} {case.path}", response.status_code // 100)] += 1
            with _recorded(found, f"{case.method} {case.path}"):
                _no_canary(user, response)

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            with _recorded(found, f"{case.method} {case.path}"):
                case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    settings = hypothesis.settings(SETTINGS, stateful_step_count=STEPS)
    _run(lambda: Machine.run(settings=settings), found, "stateful")
    assert not found, "\n\n".join(found[-3:])
    print(f"stateful {user}: {seen.total()} requests")  # shown with -s
    assert seen[("POST /queries", 2)], seen
    uses = (  # the registered query used by the name its registration answered
        "GET /queries/{name}",
        "GET /queries/{name}/explain",
        "POST /queries/{name}/start",
        "POST /queries/{name}/stop",
        "DELETE /queries/{name}",
    )
    assert any(seen[(use, 2)] for use in uses), seen


def test_the_canary_is_readable_by_its_reader_and_hidden_from_mallory(fuzz_server, callers):
    """The canary check can fail: Al reads what mallory must not; subscribing to the
    secret query (the one route not fuzzed) is refused to her."""
    with fuzz_server.client(_token(fuzz_server, "al")) as al:
        assert CANARY in al.get(f"/queries/{SECRET_QUERY}").text
        assert CANARY in al.get("/catalog").text
    with fuzz_server.client(callers["mallory"]) as mallory:
        assert CANARY not in mallory.get("/catalog").text
        assert mallory.get(f"/queries/{SECRET_QUERY}/subscribe").status_code == 404
        assert mallory.get(f"/streams/{SECRET_STREAM}").status_code == 404


# -- regression tests of what the fuzzer found ----------------------------------------------


def _is_error_body(answer: Any, status: int, error: str) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["error"] == error and body["message"] and "detail" not in body, body
    return body


def test_a_body_that_is_not_utf8_is_a_documented_422_not_fastapis_400(fuzz_server, callers) -> None:
    with fuzz_server.client(callers["joe"]) as joe:
        answer = joe.post(
            "/users", content=b"o\xff\xfe\x1aK", headers={"Content-Type": "application/json"}
        )
    _is_error_body(answer, 422, "invalid")


def test_routing_refusals_carry_the_api_error_body(fuzz_server, callers) -> None:
    with fuzz_server.client(callers["joe"]) as joe:
        _is_error_body(joe.get("/no/such/route"), 404, "not_found")
        _is_error_body(joe.patch("/catalog"), 405, "method_not_allowed")


def test_an_audit_before_id_past_64_bits_is_a_422_not_a_500(fuzz_server, callers) -> None:
    with fuzz_server.client(callers["joe"]) as joe:
        _is_error_body(joe.get("/audit", params={"before_id": 2**63}), 422, "invalid")
        assert joe.get("/audit", params={"before_id": 2**63 - 1}).status_code == 200


def test_an_unknown_query_parameter_is_refused_naming_the_known_ones(fuzz_server, callers):
    """A typo is refused, not served as if it had not been written; the message names
    the route's parameters, not the caller's text."""
    with fuzz_server.client(callers["mallory"]) as mallory:
        body = _is_error_body(mallory.get("/audit", params={"befor_id": 3}), 422, "invalid")
        assert "before_id" in body["message"] and "befor_id" not in body["message"]
        empty = mallory.get("/catalog", params={"": "false"})
        assert "none" in _is_error_body(empty, 422, "invalid")["message"]
        typo = mallory.post("/streams/mallorys/elements", params={"asign": "seq"}, content="")
        _is_error_body(typo, 422, "invalid")
        assert mallory.get("/audit", params={"limit": 1}).status_code == 200


def test_every_operation_documents_the_body_limit_and_unknown_parameters(fuzz_server) -> None:
    """413 and 422 can come from any route (the body limit is checked before routing);
    the document declared them on some routes only."""
    with fuzz_server.client() as anonymous:
        document = anonymous.get("/openapi.json").json()
        oversized = anonymous.request("GET", "/healthz", content=b"x" * 70_000)
    _is_error_body(oversized, 413, "too_large")
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert {"413", "422"} <= set(operation["responses"]), f"{method} {path}"


def test_new_passwords_document_the_policy_minimum(fuzz_server) -> None:
    """The document let an empty password be set (always refused by the policy)."""
    with fuzz_server.client() as anonymous:
        schemas = anonymous.get("/openapi.json").json()["components"]["schemas"]
    for model, field in (("UserCreate", "password"), ("PasswordReset", "password")):
        assert schemas[model]["properties"][field]["minLength"] == 12
    assert schemas["PasswordChange"]["properties"]["new"]["minLength"] == 12
    assert "minLength" not in schemas["PasswordChange"]["properties"]["current"]


def test_created_objects_link_to_their_uses(fuzz_server) -> None:
    """The stateful fuzzer's chains: every declared link names an operation that exists."""
    with fuzz_server.client() as anonymous:
        paths = anonymous.get("/openapi.json").json()["paths"]
    declared = {
        (path, method): operation["responses"]["201"]["links"]
        for path, method in (("/schemas", "post"), ("/streams", "post"), ("/queries", "post"))
        for operation in [paths[path][method]]
    }
    assert "delete_queries_name" in declared[("/queries", "post")]
    for links in declared.values():
        for link in links.values():
            pointer = link["operationRef"].removeprefix("#/paths/")
            path, _, method = pointer.rpartition("/")
            assert method in paths[path.replace("~1", "/").replace("~0", "~")], pointer


def test_an_oversized_body_gets_its_413_not_a_reset_connection(fuzz_server, callers) -> None:
    """The server answered 413 and closed while the client was still sending a 250 KB
    query text: the client (urllib3, as schemathesis and many clients) saw an SSL EOF
    instead of the answer naming the limit, in about a third of the tries."""
    import json

    import requests

    body = json.dumps({"name": "big", "text": "\ud857\udddc" * 20_000}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {callers['joe']}"}
    with requests.Session() as session:
        for _ in range(20):
            answer = session.post(
                f"{fuzz_server.url}/queries",
                data=body,
                headers=headers,
                verify=str(fuzz_server.cert),
                timeout=30,
            )
            _is_error_body(answer, 413, "too_large")


def test_a_refused_password_reset_costs_no_password_hash(fuzz_server, callers) -> None:
    """An ordinary user's refused resets made the server compute a memory-hard hash
    each (the policy and the hash came before the rights check): seen in the fuzzer's
    timings, a request that costs any logged-in user nothing and the server much."""
    passwords = fuzz_server.service.security.passwords
    hashed: list[str] = []
    original = passwords.hash
    passwords.hash = lambda password: hashed.append(password) or original(password)
    body = {"password": "a long enough new password"}
    try:
        with fuzz_server.client(callers["mallory"]) as mallory:
            _is_error_body(mallory.post("/users/victim/password", json=body), 403, "forbidden")
        assert hashed == []
        with fuzz_server.client(callers["joe"]) as joe:  # the counter counts
            assert joe.post("/users/victim/password", json=body).status_code == 200
        assert len(hashed) == 1
    finally:
        del passwords.hash

"""The web console in a real browser (Debian's Chromium) against the real server over TLS.

One server and one browser for the module; each test opens its own browser context, so
tokens, storage and cookies never carry over. Tests run in file order and share the
``ward`` stream. Each test tries to break one rule the console must keep
(docs/console.md) and fails if the console or the server stops enforcing it.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from html.parser import HTMLParser
from zoneinfo import ZoneInfo

import pytest

from tests.console.conftest import ZONE, snap, tail_rows
from tests.server.conftest import poll

pytestmark = pytest.mark.spark

HOSTILE = [
    '<img src=x onerror="window.__xss=1">',
    "<script>window.__xss=2</script>",
    '"><svg onload="window.__xss=3">',
]
HOSTILE_USER = "<img src=y onerror=window.__xss=4>"
QUERY = "SELECT patient_id, note, beats_per_min FROM ward WHERE patient_id >= 100"


def _grant(client, permission, kind, obj, role) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role}
    answer = client.post("/grants", json=body)
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def ward(console_server):
    """Joe's stream ``ward``: Al (CUSTOMER1) sees and reads it and may add queries;
    Mallory (OTHER) may only look at the catalog."""
    joe = console_server.login("joe", ["ADMIN"])
    schema = {
        "name": "ward_s",
        "attributes": [
            ["patient_id", "bigint"],
            ["note", "string"],
            ["beats_per_min", "double"],
            ["ts", "bigint"],
        ],
        "tid": "patient_id",
        "event_time": "ts",
    }
    assert joe.post("/schemas", json=schema).status_code == 201
    assert joe.post("/streams", json={"name": "ward", "schema": "ward_s"}).status_code == 201
    for role in ("CUSTOMER1", "OTHER"):
        _grant(joe, "VIEW CATALOG", "system", "system", role)
    _grant(joe, "VIEW OBJECT", "stream", "ward", "CUSTOMER1")
    _grant(joe, "READ TUPLE", "stream", "ward", "CUSTOMER1")
    _grant(joe, "ADD", "system", "system", "CUSTOMER1")
    # The channel's policy and a first row now: secure ingest's first batch (slow on a
    # loaded machine) runs while the first tests do, not while the tail test waits.
    _ingest(joe, [{"patient_id": 1, "note": "warm-up", "beats_per_min": 1.0, "ts": 0}], True)
    return joe


def _ingest(joe, rows: list[dict], with_policy: bool) -> None:
    """Rows of ``ward``; patient, note and time readable by ADMIN and CUSTOMER1, the
    heart rate by CUSTOMER1 only (so Joe's rows have it masked, Al's do not)."""

    def sp(attributes: str, roles: str) -> dict:
        return {
            "type": "sp",
            "provider": "joe.w",
            "ddp": {"streams": "ward", "tuples": "*", "attributes": attributes},
            "srp": {"roles": roles, "grant_option": False},
            "sign": "+",
            "immutable": False,
        }

    lines = [sp("{patient_id, note, ts}", "{ADMIN, CUSTOMER1}"), sp("beats_per_min", "{CUSTOMER1}")]
    lines = lines if with_policy else []
    lines += [{"provider": "joe.w", "values": values} for values in rows]
    body = "\n".join(json.dumps(x) for x in lines)
    answer = joe.post("/streams/ward/elements", params={"assign": "seq"}, content=body)
    assert answer.json()["accepted"] == len(lines), answer.text


# -- served from the package, strict CSP ---------------------------------------------------------


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict] = []
        self.inline: list[str] = []
        self.handlers: list[str] = []
        self.styles = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs) -> None:
        named = dict(attrs)
        self.handlers += [k for k in named if k.startswith("on")]
        self.styles += tag == "style" or "style" in named
        if tag == "script":
            self.scripts.append(named)
            self._in_script = True

    def handle_endtag(self, tag) -> None:
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)


def test_the_console_is_served_from_the_package_with_a_strict_csp(console_server) -> None:
    from streamshield.server.routes.console import assets

    with console_server.client() as anonymous:
        redirect = anonymous.get("/console")
        page = anonymous.get("/console/")
        files = {path: anonymous.get(f"/console/{path}") for path in assets()}
        escape = anonymous.get("/console/js%2F..%2F..%2Fapp.py")
        api = anonymous.get("/openapi.json").json()
    assert redirect.status_code == 308 and redirect.headers["location"] == "/console/"
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = {d.split()[0]: d.split()[1:] for d in page.headers["content-security-policy"].split("; ")}
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"] and csp["style-src"] == ["'self'"]
    assert csp["connect-src"] == ["'self'"] and csp["frame-ancestors"] == ["'none'"]
    assert csp["require-trusted-types-for"] == ["'script'"]
    assert page.headers["x-content-type-options"] == "nosniff"
    parsed = _Page()
    parsed.feed(page.text)
    assert parsed.scripts == [{"type": "module", "src": "js/main.js"}]
    assert parsed.inline == [] and parsed.handlers == [] and parsed.styles == 0
    assert {"index.html", "console.css", "js/main.js", "js/views/tail.js"} <= set(files)
    for path, answer in files.items():
        assert answer.status_code == 200, path
        assert "content-security-policy" in answer.headers, path
        # The SVG namespace is a name, never fetched; comments (the vendored uPlot cites its
        # sources in them) fetch nothing either. Any other URL would be a remote asset.
        text = answer.text.replace("http://www.w3.org/2000/svg", "")
        if path.endswith((".js", ".css")):
            text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
            text = re.sub(r"(?<![:\\\"'])//.*$", "", text, flags=re.M)
        assert not re.search(r"\b(https?:)?//[a-z]", text, re.I), f"{path}: a remote URL"
        if path.endswith(".js"):
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
                assert sink not in answer.text, f"{path} uses {sink}"
    assert escape.status_code == 404
    assert not any(p.startswith("/console") for p in api["paths"])


def test_the_front_page_leads_to_the_console_and_docs_work_offline(console) -> None:
    """``/`` opens the console; ``/docs`` draws Swagger UI from the package's copy with
    every request on this server (a request elsewhere is recorded and refused)."""
    page, elsewhere = console.page, []
    origin = console.server.url

    def outside(route) -> None:
        elsewhere.append(route.request.url)
        route.abort()

    page.route(lambda url: not url.startswith(origin), outside)
    page.goto(f"{origin}/")
    assert page.url == f"{origin}/console/"
    page.wait_for_selector("#login-user")
    page.goto(f"{origin}/docs")
    title = page.wait_for_selector(".swagger-ui .info .title")
    assert "streamshield" in title.text_content()
    page.wait_for_selector(".swagger-ui .opblock-tag")  # the operations, from /openapi.json
    assert page.locator(".swagger-ui .opblock").count() > 20
    assert elsewhere == [], elsewhere
    with console.server.client() as anonymous:
        assert anonymous.get("/docs/swagger-ui/LICENSE.txt").status_code == 200
        assert anonymous.get("/docs/swagger-ui/../app.py").status_code == 404
        assert anonymous.get("/redoc").status_code == 404  # ReDoc would come from a CDN


# -- login, token, CSRF --------------------------------------------------------------------------


def test_login_shows_a_refusal_then_keeps_the_token_out_of_storage(console, ward) -> None:
    console.login("al", ["CUSTOMER1"], password="wrong password")
    error = console.page.wait_for_selector("#login-error")
    snap(console.page, "login")
    assert "unauthorized" in error.text_content()
    assert console.page.input_value("#login-password") == ""  # not kept in the form
    console.login("al", ["CUSTOMER1"])
    assert console.page.text_content("#who-roles") == "CUSTOMER1"
    console.page.wait_for_selector("#streams")
    streams = console.page.locator("#streams tbody td:first-child").all_text_contents()
    assert streams == ["ward"]
    assert console.page.locator("#register").count() == 1  # Al may add queries
    snap(console.page, "catalog")
    page = console.page
    # The token lives in memory only: no cookie (nothing for another site to ride on),
    # nothing in either storage, not in the URL.
    assert console.context.cookies() == []
    assert page.evaluate("() => localStorage.length + sessionStorage.length") == 0
    assert console.tokens and all(t not in page.url for t in console.tokens)
    # The CSP is enforced by the browser: no string becomes HTML, no inline script runs.
    outcome = page.evaluate(
        """() => {
            const tried = [];
            try { document.body.innerHTML = '<b>x</b>'; tried.push('html') }
            catch (e) { tried.push(e.name) }
            try {
                const s = document.createElement('script');
                s.textContent = 'window.__inline = 1';
                document.head.append(s);
                tried.push('script');
            } catch (e) { tried.push(e.name) }
            return tried;
        }"""
    )
    assert outcome == ["TypeError", "TypeError"]
    assert page.evaluate("() => window.__inline") is None


def test_a_query_the_api_rejects_shows_its_message_beside_the_text(
    console, console_server, ward
) -> None:
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.fill("#register-name", "bad_q")
    page.fill("#register-text", "SELECT nope FROM ward")
    page.click("#register button[type=submit]")
    error = page.wait_for_selector("#register-problem #register-error")
    assert "query_rejected" in error.text_content() and "nope" in error.text_content()
    assert page.get_attribute("#register-text", "aria-invalid") == "true"
    snap(page, "register-rejected")
    assert page.url.endswith("#/catalog")
    with console_server.client(console.tokens[-1]) as al:
        assert al.get("/queries/bad_q").status_code == 404  # nothing was registered


# -- the live tail ---------------------------------------------------------------------------------


def _register_and_watch(console, name: str) -> None:
    page = console.page
    page.fill("#register-name", name)
    page.fill("#register-text", QUERY)
    page.click("#register button[type=submit]")
    page.wait_for_url(f"**/console/#/query/{name}", timeout=120_000)
    assert page.text_content("#query-status") == "running"
    assert page.text_content("#query-text") == QUERY
    page.click("#tail-watch")
    page.wait_for_function(
        "() => document.getElementById('tail-state').textContent === 'Watching live.'"
    )


def test_the_tail_masks_per_user_and_shows_hostile_values_as_text(
    console, second_console, ward
) -> None:
    joe, al = console, second_console
    joe.login("joe", ["ADMIN"])
    al.login("al", ["CUSTOMER1"])
    _register_and_watch(joe, "ward_joe")
    _register_and_watch(al, "ward_al")

    # Al pauses before the rows come: they keep arriving (counted), the table holds
    # still; resume shows them.
    al.page.click("#tail-pause")
    assert al.page.get_attribute("#tail-pause", "aria-pressed") == "true"

    notes = [*HOSTILE, None]
    rows = [
        {"patient_id": 100 + i, "note": note, "beats_per_min": 70.0 + i, "ts": i}
        for i, note in enumerate(notes)
    ]
    _ingest(ward, rows, with_policy=False)
    poll(lambda: len(tail_rows(joe.page)) >= len(rows), timeout=120)
    al.page.wait_for_function(
        f"() => document.getElementById('tail-state').textContent.includes('{len(rows)} new rows')",
        timeout=120_000,
    )
    assert tail_rows(al.page) == [] and "No rows yet" in al.page.text_content("#tail-rows")
    al.page.click("#tail-pause")
    poll(lambda: len(tail_rows(al.page)) == len(rows), timeout=10)

    for console_, beats_masked in ((joe, True), (al, False)):
        shown = tail_rows(console_.page)
        assert len(shown) == len(rows)
        by_patient = {int(r["patient_id"][1]): r for r in shown}
        for i, note in enumerate(notes):
            row = by_patient[100 + i]
            if note is None:  # a real NULL: shown as null, not as masked
                assert row["note"] == ["null", "null"]
            else:  # markup and script shown verbatim, as text
                assert row["note"] == ["", note]
            if beats_masked:
                assert row["beats_per_min"] == ["masked", "masked"]
            else:
                assert row["beats_per_min"] == ["", str(70 + i)]
        page = console_.page
        snap(page, f"tail-{'masked' if beats_masked else 'readable'}")
        assert page.locator("#tail img, #tail svg, #tail script").count() == 0
        assert page.evaluate("() => window.__xss") is None

    # Al may watch Joe's query once granted (nothing else is offered to him there), and
    # his tail ends, with the reason, as soon as the grant is revoked.
    shared = [
        ("VIEW OBJECT", "query", "ward_joe"),
        ("VIEW OBJECT", "stream", "ward_joe_out"),
        ("SUBSCRIBE", "stream", "ward_joe_out"),
    ]
    for permission, kind, obj in shared:
        _grant(ward, permission, kind, obj, "CUSTOMER1")
    al.open("#/query/ward_joe")
    al.page.click("#tail-watch")
    al.page.wait_for_function(
        "() => document.getElementById('tail-state').textContent === 'Watching live.'"
    )
    assert al.page.locator("#start, #stop, #remove").count() == 0
    assert al.page.locator("#query-text").count() == 0  # the text: owner and admins only
    body = {"permission": "SUBSCRIBE", "kind": "stream", "object": "ward_joe_out"}
    revoked = ward.request("DELETE", "/grants", json={**body, "role": "CUSTOMER1"})
    assert revoked.status_code == 200, revoked.text
    al.page.wait_for_function(
        "() => document.getElementById('tail-state').textContent.startsWith('Ended (closed)')",
        timeout=30_000,
    )
    assert al.page.is_enabled("#tail-watch") and al.page.is_disabled("#tail-pause")

    # Stop and remove from the query page (remove asks twice).
    page = joe.page
    page.click("#stop")
    page.wait_for_function(
        "() => document.getElementById('query-status')?.textContent === 'stopped'",
        timeout=120_000,
    )
    assert page.locator("#start").count() == 1 and page.locator("#stop").count() == 0
    page.click("#remove")
    page.click("#remove-confirm")
    page.wait_for_url("**/console/#/catalog")
    page.wait_for_selector("#streams")
    assert "ward_joe" not in page.text_content("main")


# -- rights ----------------------------------------------------------------------------------------


def test_a_user_without_rights_is_not_offered_admin_pages_and_is_refused(
    console, console_server, ward
) -> None:
    console.login("mallory", ["OTHER"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert page.locator("#nav a").all_text_contents() == ["Catalog", "My audit trail"]
    assert page.locator("#register").count() == 0  # no ADD: no register form
    page.wait_for_selector("main:has-text('No stream is visible')")  # the catalog has loaded
    # Forced: the page asks the API, which refuses; the console shows the refusal.
    console.open("#/users")
    page.wait_for_selector("#users-error")
    assert "forbidden" in page.text_content("#users-error")
    snap(page, "users-refused")
    assert page.locator("#users").count() == 0
    with console_server.client(console.tokens[-1]) as mallory:
        assert mallory.get("/users").status_code == 403
    # Someone else's query: not visible, so not found (and nothing is offered).
    console.open("#/query/ward_al")
    page.wait_for_selector("#query-error")
    assert "not_found" in page.text_content("#query-error")
    assert page.locator("#start, #stop, #remove, #tail-watch").count() == 0


def test_an_administrator_is_offered_the_users_page(console, ward) -> None:
    console.login("joe", ["ADMIN"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert "Users" in page.locator("#nav a").all_text_contents()
    page.click("#nav a:text('Users')")
    page.wait_for_selector("#users")
    assert page.locator("#users tbody td:first-child").all_text_contents() == [
        "al",
        "joe",
        "mallory",
    ]


# -- audit -----------------------------------------------------------------------------------------


def test_the_audit_view_pages_newest_first_filters_and_shows_text(
    console, console_server, ward
) -> None:
    with console_server.client() as anonymous:
        refused = anonymous.post(
            "/login", json={"user": HOSTILE_USER, "password": "x", "roles": ["ADMIN"]}
        )
        assert refused.status_code == 401
    for _ in range(6):  # more than two pages of 10 whatever ran before
        console_server.login("al", ["CUSTOMER1"]).close()
    console.login("joe", ["ADMIN"])
    page = console.page
    console.open("#/audit")
    page.wait_for_selector("#audit tbody tr")
    page.select_option("#audit-limit", "10")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('#audit tbody tr').length === 10")
    first = page.eval_on_selector_all("#audit time", "ts => ts.map((t) => t.dateTime)")
    assert first == sorted(first, reverse=True)
    page.click("#audit-older")
    page.wait_for_function(
        f"() => document.querySelector('#audit time')?.dateTime <= {json.dumps(first[-1])}"
        " && !document.querySelector('#audit-newest')?.disabled"
    )
    second = page.eval_on_selector_all("#audit time", "ts => ts.map((t) => t.dateTime)")
    assert second and second == sorted(second, reverse=True) and second[0] <= first[-1]

    page.fill("#audit-action", "login")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_function(
        "() => { const actions = [...document.querySelectorAll('#audit tbody td:nth-child(3)')];"
        " return actions.length > 0 && actions.every((td) => td.textContent === 'login') }"
    )
    rows = page.eval_on_selector_all(
        "#audit tbody tr", "rs => rs.map((r) => [...r.cells].map((c) => c.textContent))"
    )
    assert len(rows) == 10
    # A failed login names the hostile user in its detail: shown as text, inert.
    hostile = json.dumps({"name": HOSTILE_USER}, separators=(",", ":"))
    assert [r[3] for r in rows if r[6] == hostile] == ["failed"]
    snap(page, "audit")
    assert page.locator("#audit img").count() == 0
    assert page.evaluate("() => window.__xss") is None
    # Times are shown in the browser's zone (New York here), not as the API's UTC.
    at = page.get_attribute("#audit time", "datetime")
    local = datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(ZoneInfo(ZONE))
    shown = f"{local.month}/{local.day}/{local.year}, {local.strftime('%-I:%M:%S %p')}"
    assert page.text_content("#audit time") == shown


def test_a_user_reads_only_her_own_audit_entries(console, ward) -> None:
    console.login("mallory", ["OTHER"])
    console.open("#/audit")
    page = console.page
    page.wait_for_selector("#audit tbody tr")
    actors = page.locator("#audit tbody td:nth-child(2)").all_text_contents()
    assert actors and set(actors) == {"mallory"}


# -- session end, server gone ---------------------------------------------------------------------


def test_logout_ends_the_session_on_the_server(console, console_server, ward) -> None:
    console.login("al", ["CUSTOMER1"])
    token = console.tokens[-1]
    with console_server.client(token) as al:
        assert al.get("/me").status_code == 200
        console.page.click("#logout")
        console.page.wait_for_selector("#login")
        assert "logged out" in console.page.text_content("#login-status")
        assert al.get("/me").status_code == 401
    assert console.page.locator("#nav a").count() == 0


def test_an_ended_session_goes_back_to_login_with_a_message(console, console_server, ward) -> None:
    console.login("al", ["CUSTOMER1"])
    console.page.wait_for_selector("#streams")  # loaded: its own call cannot be the one refused
    with console_server.client(console.tokens[-1]) as al:
        assert al.post("/logout").status_code == 200  # e.g. expiry, or a logout elsewhere
    console.page.click("#nav a:text('My audit trail')")
    console.page.wait_for_selector("#login")
    assert "session ended" in console.page.text_content("#login-status")


def test_a_server_that_went_away_shows_a_banner_with_retry(console, ward) -> None:
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.wait_for_selector("#streams")
    page.route("**/catalog", lambda route: route.abort())
    page.click("#nav a:text('My audit trail')")
    page.wait_for_selector("#audit-results")
    page.click("#nav a:text('Catalog')")
    banner = page.wait_for_selector("#banner:not([hidden])")
    assert "cannot be reached" in banner.text_content()
    page.unroute("**/catalog")
    page.click("#banner button")
    page.wait_for_selector("#streams")
    assert page.is_hidden("#banner")


def test_me_says_what_a_session_may_do_and_grants_nothing(console_server, ward) -> None:
    joe = console_server.login("joe", ["ADMIN"])
    al = console_server.login("al", ["CUSTOMER1"])
    mallory = console_server.login("mallory", ["OTHER"])
    try:
        assert joe.get("/me").json() | {"expires_at": None} == {
            "user": "joe",
            "roles": ["ADMIN"],
            "expires_at": None,
            "administrator": True,
            "add_queries": True,
        }
        assert (al.get("/me").json()["administrator"], al.get("/me").json()["add_queries"]) == (
            False,
            True,
        )
        assert (
            mallory.get("/me").json()["administrator"],
            mallory.get("/me").json()["add_queries"],
        ) == (
            False,
            False,
        )
        # Al's own query: every action; Joe (administrator) may remove it too; Mallory
        # cannot see it, and that looks like a query that does not exist.
        mine = al.get("/me/queries/ward_al").json()
        assert mine == {
            "name": "ward_al",
            "set_status": True,
            "remove": True,
            "subscribe": True,
            "read_text": True,
        }
        assert joe.get("/me/queries/ward_al").json()["remove"] is True
        hidden = mallory.get("/me/queries/ward_al")
        assert hidden.status_code == 404
        assert hidden.json() == mallory.get("/me/queries/no_such_query").json()
        with console_server.client() as anonymous:
            assert anonymous.get("/me").status_code == 401
    finally:
        for client in (joe, al, mallory):
            client.close()


def test_a_slow_page_never_draws_over_the_page_the_user_moved_to(console, ward) -> None:
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.wait_for_selector("#streams")
    page.click("#nav a:text('My audit trail')")
    page.wait_for_selector("#audit tbody tr")
    held = []
    page.route("**/catalog", lambda route: held.append(route))  # its answer is held back
    page.click("#nav a:text('Catalog')")
    for _ in range(200):  # bounded; Playwright dispatches the route while it waits
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the catalog was not requested"
    page.click("#nav a:text('My audit trail')")
    page.wait_for_selector("#audit tbody tr")
    with page.expect_event("requestfinished", lambda r: r.url.endswith("/catalog")):
        held[0].continue_()  # the old answer arrives now
    page.unroute("**/catalog")
    page.evaluate("() => new Promise((done) => setTimeout(done, 100))")  # its render's turn
    assert page.locator("#streams").count() == 0
    assert page.locator("#audit").count() == 1

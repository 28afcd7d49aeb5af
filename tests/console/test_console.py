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

from tests.console.conftest import NARROW, ZONE, snap, tail_rows
from tests.server.conftest import PASSWORD, poll

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


def wait_until_held(page, held: list, why: str) -> None:
    """Until a held route's request has come (bounded; Playwright dispatches routes only
    while the test waits in one of its calls)."""
    for _ in range(200):
        if held:
            return
        page.wait_for_timeout(50)
    raise AssertionError(why)


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
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    docs = page.goto(f"{origin}/docs")
    assert docs is not None
    policy = docs.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"].startswith("'self' 'sha256-"), policy
    assert "unsafe" not in directives["script-src"], policy  # the start-up script by hash
    title = page.wait_for_selector(".swagger-ui .info .title")
    assert "streamshield" in title.text_content()
    page.wait_for_selector(".swagger-ui .opblock-tag")  # the operations, from /openapi.json
    assert page.locator(".swagger-ui .opblock").count() > 20
    assert elsewhere == [], elsewhere
    assert refused == [], refused  # Swagger UI runs under the page's policy
    with console.server.client() as anonymous:
        assert anonymous.get("/docs/swagger-ui/LICENSE.txt").status_code == 200
        assert anonymous.get("/docs/swagger-ui/../app.py").status_code == 404
        assert anonymous.get("/redoc").status_code == 404  # ReDoc would come from a CDN


# -- login, token, CSRF --------------------------------------------------------------------------


def test_login_shows_a_refusal_then_keeps_the_token_in_the_tab_only(console, ward) -> None:
    console.login("al", ["CUSTOMER1"], password="wrong password")
    error = console.page.wait_for_selector("#login-error")
    snap(console.page, "login")
    assert "unauthorized" in error.text_content()
    assert console.page.input_value("#login-password") == ""  # not kept in the form
    console.login("al", ["CUSTOMER1"])
    assert console.page.text_content("#who-roles") == "CUSTOMER1"
    console.page.wait_for_selector("#streams")
    streams = console.page.locator("#streams tbody td:first-child").all_text_contents()
    # The admin module may run first (longest files first) and show Al its vitals too.
    assert "ward" in streams
    assert console.page.locator("#register").count() == 1  # Al may add queries
    snap(console.page, "catalog")
    page = console.page
    # The token is kept for this tab only: no cookie (nothing for another site to ride
    # on), nothing in localStorage, not in the URL; sessionStorage holds it and nothing
    # else.
    assert console.context.cookies() == []
    stored = "() => [localStorage.length, Object.entries(sessionStorage)]"
    assert page.evaluate(stored) == [0, [["streamshield.token", console.tokens[-1]]]]
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
    sized_console, console_server, ward
) -> None:
    console = sized_console
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.fill("#register-name", "bad_q")
    page.fill("#register-text", "SELECT nope FROM ward")
    # While the server admits it (seconds for an aggregate), Register shows it is
    # pending and cannot be sent twice; its answer is held back here to look.
    held = []
    page.route("**/queries", lambda route: held.append(route))
    page.click("#register button[type=submit]")
    page.wait_for_selector("#register-submit[aria-busy='true']")
    wait_until_held(page, held, "the query was not sent")
    assert page.is_disabled("#register-submit")
    assert page.text_content("#register-submit") == "Registering…"
    assert page.get_attribute("#register-submit", "aria-busy") == "true"
    held[0].continue_()
    page.wait_for_selector("#register-submit:not([disabled])")
    page.unroute("**/queries")
    assert page.text_content("#register-submit") == "Register"
    error = page.wait_for_selector("#register-problem #register-error")
    assert "query_rejected" in error.text_content() and "nope" in error.text_content()
    assert page.get_attribute("#register-text", "aria-invalid") == "true"
    snap(page, "register-rejected" + ("-390" if console.width == NARROW else ""))
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
    # Live results are on with the page: no click, and the watch button waits for a stop.
    page.wait_for_function(
        "() => document.getElementById('tail-state')?.textContent === 'Watching live.'"
    )
    assert page.is_disabled("#tail-watch")
    # The status box is read again while the page is open: the subscription shows.
    page.wait_for_selector("#query-subscribers:text-is('1')", timeout=30_000)


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
    # Both queries read ward as branches of one shared network: its figures say so.
    assert joe.page.text_content("#query-network") == "the shared network of ward"
    assert joe.page.locator("dt:text-is('Last batch (network)')").count() == 1
    batch = joe.page.text_content("#query-last-batch")
    _ingest(ward, rows, with_policy=False)
    poll(lambda: len(tail_rows(joe.page)) >= len(rows), timeout=120)
    # The last batch shown advances with no reload (it is re-read every 3 s).
    before = -1 if batch == "—" else int(batch)
    poll(lambda: _batch(joe.page) > before, timeout=30)
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
    al.page.wait_for_function(
        "() => document.getElementById('tail-state')?.textContent === 'Watching live.'"
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
    # Redrawn after Stop: one chart samples (the earlier one's timer is cleared), and the
    # stopped query's tail is not opened.
    assert page.evaluate("() => window.__intervals()") == 1
    assert page.is_enabled("#tail-watch") and page.text_content("#tail-state") == "Not watching."
    page.click("#remove")
    page.click("#remove-confirm")
    page.wait_for_url("**/console/#/catalog")
    page.wait_for_selector("#streams")
    assert "ward_joe" not in page.text_content("main")
    assert page.evaluate("() => window.__intervals()") == 0  # left: nothing polls


def _batch(page) -> int:
    shown = page.text_content("#query-last-batch")
    return -1 if shown == "—" else int(shown)


# -- rights ----------------------------------------------------------------------------------------


def test_a_user_without_rights_is_not_offered_admin_pages_and_is_refused(
    console, console_server, ward
) -> None:
    console.login("mallory", ["OTHER"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert page.locator("#nav a").all_text_contents() == ["Catalog", "My audit trail", "Sinks"]
    assert page.locator("#register").count() == 0  # no ADD: no register form
    # The catalog has loaded (the admin module, when it ran first, showed her a stream).
    page.wait_for_selector("#streams, main:has-text('No stream is visible')")
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
    users = page.locator("#users tbody td:first-child").all_text_contents()
    assert users == sorted(users) and {"al", "joe", "mallory"} <= set(users)


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


def test_a_reload_and_a_new_tab_keep_the_session_until_logout(
    sized_console, console_server, ward
) -> None:
    console = sized_console
    narrow = console.width == NARROW
    console.login("al", ["CUSTOMER1"])
    page = console.page
    token = console.tokens[-1]
    console.open("#/audit")
    page.wait_for_selector("#audit tbody tr")
    page.reload()
    page.wait_for_selector("#audit tbody tr")
    assert page.text_content("#who-user") == "al" and page.url.endswith("#/audit")
    # A link opened in a new tab (no opener, so nothing is copied into its storage): it
    # asks the open tab for the session instead of the password.
    other = console.context.new_page()
    other.goto(f"{console.server.url}/console/#/catalog")
    other.wait_for_selector("#streams")
    assert other.text_content("#who-user") == "al"
    assert other.evaluate("() => sessionStorage.getItem('streamshield.token')") == token
    assert console.tokens == [token]  # one login, one token, whatever the tabs did
    for tab in (page, other):
        assert tab.evaluate("() => localStorage.length") == 0
        assert token not in tab.url
    # Logging out in one tab ends the session and clears it in every tab.
    if narrow:
        page.click("#menu")
    page.click("#logout")
    page.wait_for_selector("#login")
    other.wait_for_selector("#login")
    assert "another tab" in other.text_content("#login-status")
    for tab in (page, other):
        assert tab.evaluate("() => sessionStorage.length") == 0
    with console_server.client(token) as al:
        assert al.get("/me").status_code == 401
    page.reload()
    page.wait_for_selector("#login")
    other.close()


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
    wait_until_held(page, held, "the catalog was not requested")
    page.click("#nav a:text('My audit trail')")
    page.wait_for_selector("#audit tbody tr")
    with page.expect_event("requestfinished", lambda r: r.url.endswith("/catalog")):
        held[0].continue_()  # the old answer arrives now
    page.unroute("**/catalog")
    page.evaluate("() => new Promise((done) => setTimeout(done, 100))")  # its render's turn
    assert page.locator("#streams").count() == 0
    assert page.locator("#audit").count() == 1


def test_a_late_refusal_of_the_last_users_request_keeps_the_next_user_logged_in(
    console, ward
) -> None:
    """A 401 ends the session only when it refused the token the tab holds now."""
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.wait_for_selector("#streams")
    page.click("#nav a:text('My audit trail')")
    page.wait_for_selector("#audit tbody tr")
    held = []

    def hold_first(route) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)  # al's catalog call: its answer is held back

    page.route("**/catalog", hold_first)
    page.click("#nav a:text('Catalog')")
    wait_until_held(page, held, "the catalog was not requested")
    page.click("#logout")
    page.wait_for_selector("#login")
    page.fill("#login-user", "joe")
    page.fill("#login-password", PASSWORD)
    page.fill("#login-roles", "ADMIN")
    page.click("#login button[type=submit]")
    page.wait_for_selector("#streams")
    joes = page.evaluate("() => sessionStorage.getItem('streamshield.token')")
    with page.expect_event("requestfinished", lambda r: r.url.endswith("/catalog")):
        held[0].continue_()  # the server refuses al's ended session now
    page.unroute("**/catalog")
    page.evaluate("() => new Promise((done) => setTimeout(done, 100))")  # its answer's turn
    assert page.locator("#login").count() == 0
    assert page.text_content("#who-user") == "joe"
    assert page.evaluate("() => sessionStorage.getItem('streamshield.token')") == joes
    page.click("#nav a[href='#/audit']")
    page.wait_for_selector("#audit-results")  # his token still works


def test_a_refusal_while_logging_out_draws_the_login_page_once(console, ward) -> None:
    """The tab forgets its token before the server ends the session: an answer refusing
    one of its requests meanwhile (a view's poll) is not the session ending, which would
    draw the login page early and again when the logout returns, wiping what was typed."""
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.wait_for_selector("#streams")
    held = []
    page.route("**/logout", lambda route: held.append(route))
    page.evaluate("() => document.getElementById('logout').click()")
    wait_until_held(page, held, "the logout was not sent")
    refusal = '{"error": "unauthorized", "message": "the session has ended"}'
    page.route(
        "**/catalog",
        lambda route: route.fulfill(status=401, content_type="application/json", body=refusal),
    )
    polled = page.evaluate(
        """async () => {
            const api = await import('/console/js/api.js');
            try { await api.call('GET', '/catalog'); return 'answered'; }
            catch (err) { return err.ended ? 'ended' : 'refused'; }
        }"""
    )
    assert polled == "refused"  # a refusal of that request, not of this tab's session
    assert page.locator("#login").count() == 0  # the logout has not returned yet
    held[0].continue_()
    page.wait_for_selector("#login-status .notice")
    assert page.text_content("#login-status") == "You are logged out."
    page.unroute("**/catalog")
    page.unroute("**/logout")


# -- both widths -----------------------------------------------------------------------------------

PAGES = [
    ("#/catalog", "#streams"),
    ("#/stream/ward", "#stream-chart-state:has-text('sample')"),
    ("#/audit", "#audit tbody tr"),
    ("#/users", "#users"),
    ("#/roles", "#roles"),
    ("#/grants", "#grants"),
    ("#/networks", "#networks-refresh"),
    ("#/password", "#password-change"),
    ("#/connectors", "#kafka-bind"),
    ("#/sinks", "#sink-delta"),
]


def test_every_page_fits_the_width_and_wide_tables_scroll_in_their_card(
    sized_console, ward
) -> None:
    console = sized_console
    narrow = console.width == NARROW
    console.login("joe", ["ADMIN"])
    page = console.page
    # The header: on a phone the navigation folds behind Menu, which opens it.
    assert page.is_visible("#menu") is narrow and page.is_visible("#nav") is not narrow
    if narrow:
        assert page.get_attribute("#menu", "aria-expanded") == "false"
        page.click("#menu")
        assert page.is_visible("#nav a:text('Users')") and page.is_visible("#logout")
        assert page.get_attribute("#menu", "aria-expanded") == "true"
        page.click("#nav a:text('Audit')")  # following a link folds it again
        page.wait_for_selector("#audit tbody tr")
        assert page.is_hidden("#nav") and page.get_attribute("#menu", "aria-expanded") == "false"
    overflow = "() => document.documentElement.scrollWidth - window.innerWidth"
    for hash_, ready in PAGES:
        console.open(hash_)
        page.wait_for_selector(ready)
        assert page.evaluate(overflow) <= 0, f"{hash_} is wider than the window"
        assert page.is_visible("#nav") is not narrow, hash_
    # The stream's chart fills its card and its legend shows the newest values.
    console.open("#/stream/ward")
    page.wait_for_selector("#stream-chart-state:has-text('sample')")
    chart = page.evaluate(
        """() => [document.querySelector('#stream-chart .uplot').offsetWidth,
                  document.getElementById('stream-chart-plot').clientWidth]"""
    )
    assert chart[1] > 0 and abs(chart[0] - chart[1]) <= 2, chart
    legend = page.locator("#stream-chart .u-legend .u-value").all_text_contents()
    assert legend and "--" not in legend and legend[0] != "no sample yet", legend
    snap(page, f"stream-chart-{console.width}")
    # The audit table: its columns keep whole words; on a phone it scrolls in its card.
    console.open("#/audit")
    page.wait_for_selector("#audit tbody tr")
    sizes = page.evaluate(
        """() => {
            const card = document.getElementById('audit-results').closest('.card');
            const rows = [...document.querySelectorAll('#audit tbody tr')];
            return [card.scrollWidth, card.clientWidth,
                    Math.max(...rows.map((r) => r.offsetHeight))];
        }"""
    )
    assert sizes[0] > sizes[1] or not narrow, sizes
    assert sizes[2] < 120, sizes  # no cell broken one letter per line
    assert page.evaluate(overflow) <= 0
    snap(page, f"audit-{console.width}")
    # The users table: "Set roles" stays on one line, the table scrolls in its card.
    console.open("#/users")
    page.wait_for_selector("#users")
    button = page.locator("#users button[data-set-roles]").first.bounding_box()
    assert button and button["height"] < 50, button  # one line (two: ~60 px)
    assert page.evaluate(overflow) <= 0
    snap(page, f"users-{console.width}")
    console.open("#/grants")
    page.wait_for_selector("#grants")
    assert page.text_content("h1") == "Grants on the system"

"""The console's administration pages in a real browser (docs/console.md).

Shares the package's server and browser with test_console (runs after it: names here are
its own, and nothing assumes a fresh catalog). An administrator builds a role, a grant and
a user in the console; the user then logs in in her own browser context and is offered
only what her roles allow; forcing the administration pages shows the API's refusals.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest

from tests.console.conftest import reader_stream, snap, tail_rows
from tests.server.conftest import poll

pytestmark = pytest.mark.spark

NORA_PW = "nora's long passphrase"


def _notice(page, which: str, text: str) -> None:
    """Waits for the page's notice of a done change (the page is read again after it)."""
    page.wait_for_selector(f"#{which}-notice:has-text({text!r})")


def test_an_administrator_builds_a_role_a_grant_and_a_user_who_then_logs_in(
    console, second_console, console_server
) -> None:
    console.login("joe", ["ADMIN"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert page.locator("#nav a").all_text_contents()[-4:-1] == ["Users", "Roles", "Grants"]

    # A role, a junior added and removed, a cycle refused inline.
    page.click("#nav a:text('Roles')")
    page.fill("#role-create-name", "WARD_NURSE")
    page.click("#role-create button[type=submit]")
    _notice(page, "roles", "WARD_NURSE created")
    page.select_option("#junior-add-role", "WARD_NURSE")
    page.select_option("#junior-add-junior", "OTHER")
    page.click("#junior-add button[type=submit]")
    _notice(page, "roles", "OTHER is now a junior of WARD_NURSE")
    row = page.locator("#roles tbody tr", has_text="WARD_NURSE")
    assert "OTHER" in row.text_content()
    page.select_option("#junior-add-role", "OTHER")
    page.select_option("#junior-add-junior", "WARD_NURSE")
    page.click("#junior-add button[type=submit]")
    page.wait_for_selector("#junior-add-error")
    assert "cycl" in page.text_content("#junior-add-error")
    snap(page, "roles")
    page.click("[data-remove='WARD_NURSE/OTHER']")
    _notice(page, "roles", "no longer a junior")
    row = page.locator("#roles tbody tr", has_text="WARD_NURSE")
    assert "OTHER" not in row.text_content()

    # A grant on SYSTEM to the new role, listed with its grantor.
    page.click("#nav a:text('Grants')")
    page.wait_for_selector("#grant")
    page.select_option("#grant-permission", "VIEW CATALOG")
    page.fill("#grant-grantee", "WARD_NURSE")
    page.click("#grant button[type=submit]")
    _notice(page, "grants", "VIEW CATALOG granted to role WARD_NURSE")
    row = page.locator("#grants tbody tr", has_text="role WARD_NURSE")
    assert row.locator("td").all_text_contents()[:4] == [
        "VIEW CATALOG",
        "role WARD_NURSE",
        "joe",
        "no",
    ]
    snap(page, "grants")
    # An object that does not exist: the API's 404, shown.
    page.fill("#grants-object-object", "no_such_stream")
    page.select_option("#grants-object-kind", "stream")
    page.click("#grants-object button[type=submit]")
    page.wait_for_selector("#grants-error")
    assert "not_found" in page.text_content("#grants-error")

    # A user: a weak password refused inline (naming the field), then created.
    page.click("#nav a:text('Users')")
    page.fill("#user-create-name", "nora")
    page.fill("#user-create-password", "short")
    page.fill("#user-create-roles", "WARD_NURSE")
    page.click("#user-create button[type=submit]")
    page.wait_for_selector("#user-create-error")
    assert "password" in page.text_content("#user-create-error")
    page.fill("#user-create-password", NORA_PW)
    page.click("#user-create button[type=submit]")
    _notice(page, "users", "User nora created")
    nora_row = page.locator("#users tbody tr", has_text="nora")
    assert page.input_value("[data-roles='nora']") == "WARD_NURSE"
    assert nora_row.locator("td").nth(2).text_content() == "no"
    snap(page, "users")

    # Nora logs in in her own browser context: no administration offered.
    second_console.login("nora", ["WARD_NURSE"], NORA_PW)
    nora = second_console.page
    nora.wait_for_selector("#who-user")
    nora.wait_for_selector("#nav a")
    assert nora.locator("#nav a").all_text_contents() == ["Catalog", "My audit trail", "Sinks"]
    nora.wait_for_selector("#streams, main .empty")
    # Forced: the API refuses users and grants (403); roles are readable by everyone,
    # but no change is offered.
    for page_hash, error in (("#/users", "#users-error"), ("#/grants", "#grants-error")):
        second_console.open(page_hash)
        nora.wait_for_selector(error)
        assert "forbidden" in nora.text_content(error)
        assert "CHANGE SYSTEM" in nora.text_content(error)
    assert nora.locator("#grant, #users").count() == 0
    second_console.open("#/roles")
    nora.wait_for_selector("#roles")
    assert nora.locator("#role-create, #junior-add, [data-remove]").count() == 0
    token = second_console.tokens[-1]
    with console_server.client(token) as as_nora:
        system = {"kind": "system", "object": "system"}
        assert as_nora.get("/grants", params=system).status_code == 403
        assert as_nora.post("/roles", json={"name": "EVIL"}).status_code == 403

    # Her roles set, then disabled: her session ends at once (back to login, with why).
    page.fill("[data-roles='nora']", "WARD_NURSE, OTHER")
    page.click("[data-set-roles='nora']")
    _notice(page, "users", "Roles of nora set")
    assert page.input_value("[data-roles='nora']") == "OTHER, WARD_NURSE"
    page.click("[data-toggle='nora']")
    _notice(page, "users", "nora disabled")
    nora_row = page.locator("#users tbody tr", has_text="nora")
    assert nora_row.locator("td").nth(2).text_content() == "yes"
    second_console.open("#/catalog")
    nora.wait_for_selector("#login")
    assert "session ended" in nora.text_content("#login-status")
    # Joe cannot disable himself: the API's 409, shown.
    page.click("[data-toggle='joe']")
    page.wait_for_selector("#admin-error")
    assert "conflict" in page.text_content("#admin-error") or "disable" in page.text_content(
        "#admin-error"
    )
    page.click("[data-toggle='nora']")
    _notice(page, "users", "nora enabled")

    # The grant revoked in the grants page.
    page.click("#nav a:text('Grants')")
    page.wait_for_selector("#grants")
    page.click("[data-revoke='VIEW CATALOG/role/WARD_NURSE']")
    _notice(page, "grants", "revoked from role WARD_NURSE")
    assert page.locator("#grants tbody tr", has_text="role WARD_NURSE").count() == 0


# -- shared networks and privacy switches ----------------------------------------------------------


def _ok(answer, *statuses: int) -> dict:
    assert answer.status_code in (statuses or (200,)), answer.text
    return answer.json()


def _vitals(joe, first: int, count: int) -> None:
    """Rows of ``vitals`` readable by CUSTOMER1 (with the channel's policy first)."""
    sp = _sp("joe.v", "*", "{ADMIN, CUSTOMER1}")
    rows = [
        {"provider": "joe.v", "values": {"id": i, "pid": 2 + i % 3, "hr": 60 + i}}
        for i in range(first, first + count)
    ]
    lines = ([sp] if first == 0 else []) + rows
    body = "\n".join(json.dumps(x) for x in lines)
    answer = joe.post("/streams/vitals/elements", params={"assign": "seq"}, content=body)
    assert _ok(answer)["accepted"] == len(lines)


def _sp(provider: str, tuples: str, roles: str) -> dict:
    """A positive sp of ``vitals`` on all attributes (the server assigns seq, ts, sn)."""
    return {
        "type": "sp",
        "provider": provider,
        "ddp": {"streams": "vitals", "tuples": tuples, "attributes": "*"},
        "srp": {"roles": roles, "grant_option": False},
        "sign": "+",
        "immutable": False,
    }


def _terminal(client, query: str) -> dict:
    networks = _ok(client.get("/networks"))["networks"]
    found = [
        s
        for n in networks
        for s in n["switches"]
        if s["kind"] == "terminal" and s["queries"] == [query]
    ]
    assert len(found) == 1, networks
    return found[0]


def _switch_row(page, stream: str, kind: str, query: str) -> list[str]:
    rows = page.locator(f"table.switches[data-stream='{stream}'] tbody tr")
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td").all_text_contents()
        if cells[0] == kind and cells[1].split(" (")[0].split(", ") == [query]:
            return cells
    raise AssertionError(f"no {kind} switch of {query} in {stream}")


def test_the_networks_page_shows_a_terminal_switch_on_then_off(
    console, second_console, console_server
) -> None:
    joe = console_server.login("joe", ["ADMIN"])
    reader_stream(joe, "vitals", [["id", "bigint"], ["pid", "bigint"], ["hr", "bigint"]])
    al = console_server.login("al", ["CUSTOMER1"])
    text = "SELECT pid, hr FROM vitals WHERE pid >= 3"
    _ok(al.post("/queries", json={"name": "hr_watch", "text": text}), 201)
    _vitals(joe, 0, 3)  # the policy, and a first batch of the network
    assert _terminal(joe, "hr_watch")["open"] is False  # nobody receives: closed

    # Al watches her query's results: her subscription opens its terminal switch.
    second_console.login("al", ["CUSTOMER1"])
    tail = second_console.page
    second_console.open("#/query/hr_watch")
    tail.wait_for_selector("#tail-state:has-text('Watching')")  # on with the page
    # The query's chart (uPlot, vendored, served from the package) samples its progress
    # under the strict CSP: no violation is logged.
    tail.wait_for_selector("#chart-state:has-text('sample')")
    assert tail.locator("#chart .uplot canvas").count() == 1
    assert not [m for m in second_console.log if "Content Security Policy" in m or "Trusted" in m]
    _vitals(joe, 3, 6)  # the '+' applies in band, at this batch of the network
    sent = time.monotonic()
    poll(lambda: _terminal(joe, "hr_watch")["open"], timeout=120, every=0.2)
    opened = time.monotonic() - sent
    # Her tail gets the batch that opened the switch, with no later batch sent: a
    # single-branch network delivers its first on-batch. Ids 4, 5, 7 and 8 have pid >= 3;
    # 1 and 2 too when the network had not read the first batch before she subscribed.
    tail.wait_for_selector("#tail tbody tr", timeout=120_000)
    first = time.monotonic() - sent
    print(f"'+' batch sent: switch on after {opened:.1f} s, first tail row after {first:.1f} s")

    def heart_rates() -> set[int]:
        return {int(r["hr"][1]) for r in tail_rows(tail)}

    poll(lambda: {64, 65, 67, 68} <= heart_rates(), timeout=60)
    assert heart_rates() <= {61, 62, 64, 65, 67, 68}
    snap(tail, "query-chart")

    console.login("joe", ["ADMIN"])
    page = console.page
    page.click("#nav a:text('Networks')")
    page.wait_for_selector("table.switches[data-stream='vitals']")
    state, counter, receivers = _switch_row(page, "vitals", "terminal", "hr_watch")[2:5]
    assert (state, counter, receivers) == ("on", "1", "al")
    on = page.locator("svg.network g.switch.on")
    assert on.count() >= 1 and page.locator("svg.network g[data-open='true']").count() >= 1
    assert page.locator("section[data-network='vitals'] svg.network g.query").count() >= 1
    snap(page, "networks")

    # She stops watching: her subscription ends, a '-' closes the switch at the next batch.
    tail.click("#tail-stop")
    second_console.open("#/catalog")
    _vitals(joe, 9, 3)
    poll(lambda: not _terminal(joe, "hr_watch")["open"], timeout=120)
    page.click("#networks-refresh")
    page.wait_for_selector("table.switches[data-stream='vitals'] .switch-state.off")
    state, counter, receivers = _switch_row(page, "vitals", "terminal", "hr_watch")[2:5]
    assert (state, counter, receivers) == ("off: no subscriber", "0", "—")
    assert "no subscriber" in page.locator("svg.network g[data-open='false']").first.text_content()
    assert page.locator("svg.network g[data-open='false']").count() >= 1
    snap(page, "networks-off")

    # Al sees her own query's switches, receivers counted, never named; Mallory (no query
    # of hers) is not offered the page and sees no network when she forces it.
    second_console.open("#/networks")
    tail.wait_for_selector("table.switches[data-stream='vitals']")
    assert _switch_row(tail, "vitals", "terminal", "hr_watch")[2:5] == [
        "off: no subscriber",
        "0",
        "",
    ]
    mallory = console_server.login("mallory", ["OTHER"])
    assert _ok(mallory.get("/networks")) == {"networks": []}

    # The stream pages: Al follows the catalog's link to the schema and to her query's
    # output; Mallory, who may not see the stream, gets the API's 404 when forcing it.
    second_console.open("#/catalog")
    tail.click("#streams a:text-is('vitals')")
    tail.wait_for_selector("#stream-schema")
    schema = [
        r.locator("td").all_text_contents() for r in tail.locator("#stream-schema tbody tr").all()
    ]
    assert schema == [["id", "bigint", "tuple id"], ["pid", "bigint", ""], ["hr", "bigint", ""]]
    snap(tail, "stream")
    second_console.open("#/stream/hr_watch_out")
    tail.wait_for_selector("#stream-columns")
    assert tail.locator("#stream-columns tbody td").all_text_contents() == ["pid", "hr"]
    assert tail.locator("main a:text-is('hr_watch')").count() == 1
    console.login("mallory", ["OTHER"])
    console.open("#/stream/vitals")
    page.wait_for_selector("#stream-error")
    assert "not_found" in page.text_content("#stream-error")
    assert page.locator("#stream-schema").count() == 0


# -- stream policies and counts, charts, passwords, networks per level -----------------------------

HOSTILE_TID = "<svg onload=window.__xss=5>"
HOSTILE_LEVEL = '[<img src=w onerror="window.__xss=7">]'


def _no_script_ran(page) -> None:
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main img, main script, main svg[onload]").count() == 0


def test_stream_policies_charts_passwords_and_networks_per_level(
    console, second_console, console_server
) -> None:
    """Runs after the networks test (its ``vitals`` stream and ``hr_watch`` query)."""
    joe = console_server.login("joe", ["ADMIN"])
    # A second channel of joe's whose policy covers tuple ids spelled as markup, and a
    # tuple on a third channel that has no policy (denied by secure ingest: nobody may
    # read it).
    sp = _sp("joe.x", f'{{"{HOSTILE_TID}", 7}}', "{ADMIN}")
    _ok(joe.post("/streams/vitals/elements", params={"assign": "seq"}, content=json.dumps(sp)))
    orphan = {"type": "tuple", "stream": "vitals", "provider": "joe.y", "seq": 1, "tid": 999}
    orphan |= {"policy": {"ts": 100, "csn": 1}, "values": {"id": 999, "pid": 9, "hr": 99}}
    assert _ok(joe.post("/streams/vitals/elements", content=json.dumps(orphan)))["accepted"] == 1
    # Nora provides a channel of her own (INJECT SP granted to her, not to a role).
    for permission in ("VIEW OBJECT", "INJECT SP"):
        body = {"permission": permission, "kind": "stream", "object": "vitals", "user": "nora"}
        _ok(joe.post("/grants", json=body))
    as_nora = console_server.login("nora", ["WARD_NURSE"], NORA_PW)
    mine = json.dumps(_sp("nora", "*", "{WARD_NURSE}"))
    _ok(as_nora.post("/streams/vitals/elements", params={"assign": "seq"}, content=mine))

    def ingest(client) -> dict:
        return _ok(client.get("/streams/vitals/ingest"))

    def landed(answer: dict) -> bool:
        providers = {c["provider"] for c in answer["channels"]}
        return answer["counts"]["tuples_denied"] >= 1 and "nora" in providers

    seen = poll(lambda: landed(a := ingest(joe)) and a, timeout=120)
    # The owner (an administrator here) reads every channel in full.
    assert seen["scope"] == "all" and seen["kind"] == "input"
    channels = {c["provider"]: c for c in seen["channels"]}
    assert set(channels) == {"joe.v", "joe.x", "nora"}
    assert {"ADMIN", "CUSTOMER1"} <= set(channels["joe.v"]["admits"])
    assert channels["joe.x"]["sps"][0]["tuples"] == f'{{"{HOSTILE_TID}", 7}}'
    assert seen["counts"]["tuples_accepted"] >= 12 and seen["counts"]["elements_accepted"] >= 15

    # Deny by default, over the real server: a reader learns only which of her own roles
    # each policy admits (no providers, no sps, nobody else's roles); a user who may see
    # the stream but holds no privilege on it is refused; one who may not see it: 404.
    al = console_server.login("al", ["CUSTOMER1"])
    as_reader = ingest(al)
    assert as_reader["scope"] == "reader"
    assert sorted(c["admits"] for c in as_reader["channels"]) == [[], [], ["CUSTOMER1"]]
    for channel in as_reader["channels"]:
        assert channel["provider"] is None and channel["sps"] is None
        assert channel["denies"] is None and not channel["full"]
    mallory = console_server.login("mallory", ["OTHER"])
    assert mallory.get("/streams/vitals/ingest").status_code == 404
    grant = {"permission": "VIEW OBJECT", "kind": "stream", "object": "vitals", "role": "OTHER"}
    _ok(joe.post("/grants", json=grant))
    refused = mallory.get("/streams/vitals/ingest")
    assert refused.status_code == 403 and "joe" not in refused.text
    assert "CUSTOMER1" not in refused.text and HOSTILE_TID not in refused.text
    assert console_server.client().get("/streams/vitals/ingest").status_code == 401

    # The console: the administrator's stream page shows the policies, sps (markup
    # shown as text), counts and the accepted/denied chart under the CSP.
    console.login("joe", ["ADMIN"])
    page = console.page
    console.open("#/stream/vitals")
    page.wait_for_selector("#stream-policies .channel[data-provider='joe.x']")
    # Two samples: the first counts, then rates per second (also a readable screenshot).
    page.wait_for_function(
        "() => parseInt(document.getElementById('stream-chart-state').textContent) >= 2"
    )
    sps_text = page.text_content("#stream-policies .channel[data-provider='joe.x'] table.sps")
    assert HOSTILE_TID in sps_text
    assert "CUSTOMER1" in page.text_content(".channel[data-provider='joe.v'] .admits")
    denied = page.text_content("#stream-counts [data-count='Tuples denied by ingest']")
    assert int(denied) >= 1
    assert page.locator("#stream-chart .uplot canvas").count() == 1
    _no_script_ran(page)
    snap(page, "stream-policies")
    # The query chart has its delivery-lag series beside throughput and batch duration.
    console.open("#/query/hr_watch")
    page.wait_for_selector("#chart-state:has-text('sample')")
    assert "delivery lag (ms)" in page.text_content("#chart .u-legend")
    assert not [m for m in console.log if "Content Security Policy" in m or "Trusted" in m]

    # Al (a reader) sees her own roles admitted, no provider; Mallory's stream page
    # shows the schema and the API's 403 in place of the policies.
    second_console.login("al", ["CUSTOMER1"])
    reader = second_console.page
    second_console.open("#/stream/vitals")
    reader.wait_for_selector("#stream-scope")
    providers = reader.locator("#stream-policies .channel").evaluate_all(
        "(cs) => cs.map((c) => c.dataset.provider)"
    )
    assert providers == ["", "", ""]
    assert reader.locator("#stream-policies table.sps").count() == 0
    second_console.login("mallory", ["OTHER"])
    second_console.open("#/stream/vitals")
    reader.wait_for_selector("#stream-policy-error")
    assert "forbidden" in reader.text_content("#stream-policy-error")
    assert reader.locator("#stream-schema").count() == 1
    # A provider (INJECT SP) sees her own channel in full and no one else's.
    provider = ingest(as_nora)
    assert provider["scope"] == "own"
    assert [(c["provider"], c["full"]) for c in provider["channels"]] == [("nora", True)]
    assert provider["channels"][0]["sps"][0]["roles"] == "{WARD_NURSE}"

    # Passwords: Nora changes her own (a wrong current one and a weak new one refused
    # inline), is offered no reset; forcing one is the API's 403.
    second_console.login("nora", ["WARD_NURSE"], NORA_PW)
    nora = second_console.page
    nora.wait_for_selector("#who-user")
    second_console.open("#/password")
    nora.wait_for_selector("#password-change")
    assert nora.locator("#password-reset").count() == 0
    nora.fill("#password-change-current", "not my password at all")
    nora.fill("#password-change-new", "nora's newer passphrase")
    nora.click("#password-change button[type=submit]")
    nora.wait_for_selector("#password-change-error")
    assert "current" in nora.text_content("#password-change-error")
    nora.fill("#password-change-current", NORA_PW)
    nora.fill("#password-change-new", "short")
    nora.click("#password-change button[type=submit]")
    nora.wait_for_selector("#password-change-error:has-text('12 characters')")
    nora.fill("#password-change-current", NORA_PW)
    nora.fill("#password-change-new", "nora's newer passphrase")
    nora.click("#password-change button[type=submit]")
    nora.wait_for_selector("#password-notice")
    with console_server.client(second_console.tokens[-1]) as as_nora:
        forced = as_nora.post("/users/joe/password", json={"password": "x" * 20})
        assert forced.status_code == 403
    # Joe resets it (any user but himself offered; the server allows no markup in user
    # names): her session ends, and the reset password is the one that works.
    console.open("#/password")
    page.wait_for_selector("#password-reset")
    options = page.locator("#password-reset-user option").all_text_contents()
    assert "nora" in options and "joe" not in options
    page.select_option("#password-reset-user", "nora")
    page.fill("#password-reset-password", "a reset passphrase for nora")
    page.click("#password-reset button[type=submit]")
    page.wait_for_selector("#password-notice:has-text('nora')")
    _no_script_ran(page)
    snap(page, "password")
    second_console.open("#/catalog")
    nora.wait_for_selector("#login")
    assert "session ended" in nora.text_content("#login-status")
    console_server.login("nora", ["WARD_NURSE"], "a reset passphrase for nora").close()

    # Networks per level. The server runs with levels off (one graph, "no level"); the
    # drawing of a network whose queries run at two levels (a hostile level name among
    # them) is checked on the same page with that answer substituted for the API's.
    page.click("#nav a:text('Networks')")
    page.wait_for_selector("section[data-network='vitals'] figure.level[data-level='']")
    levels = _ok(joe.get("/networks"))["networks"][0]["levels"]
    assert levels == {"hr_watch": None}
    two = {
        "stream": "vitals",
        "queries": ["hr_watch", "hr_secret"],
        "levels": {"hr_watch": "[1, B]", "hr_secret": HOSTILE_LEVEL},
        "switches": [
            _switch("initial", ["hr_watch", "hr_secret"], True, counter=1),
            _switch("terminal", ["hr_watch"], True, receivers=1),
            _switch("terminal", ["hr_secret"], False, receivers=0),
        ],
    }
    page.route("**/networks", lambda route: route.fulfill(json={"networks": [two]}))
    page.click("#networks-refresh")
    page.wait_for_selector("figure.level[data-level='[1, B]']")
    figures = page.locator("section[data-network='vitals'] figure.level")
    assert figures.count() == 2
    watch = page.locator("figure.level[data-level='[1, B]']")
    assert watch.locator("g.query").count() == 1 and watch.locator("g.switch").count() == 2
    assert watch.locator("g.switch.on").count() == 2
    secret = figures.nth(1)
    assert secret.locator("figcaption").text_content() == f"Level {HOSTILE_LEVEL}"
    assert secret.locator("g[data-open='false']").count() == 1
    assert "counter 1" in secret.text_content()
    _no_script_ran(page)
    snap(page, "networks-levels")
    page.unroute("**/networks")


def _switch(kind: str, queries: list[str], on: bool, **counts: int) -> dict:
    return {
        "id": f"{kind}:{','.join(queries)}:0",
        "kind": kind,
        "queries": queries,
        "other_queries": 0,
        "open": on,
        "counter": counts.get("counter"),
        "receivers": counts.get("receivers"),
        "users": None,
        "since": "2026-11-24T12:00:00Z",
    }


# -- the network's drawing -------------------------------------------------------------------------

CROSSED = {
    "stream": "vitals",
    "kind": "selections",
    "queries": ["qa", "qb", "qc"],
    "levels": {"qa": None, "qb": None, "qc": None},
    # In the answer's order, in-network [qc | qa, qb] and terminal [qb, qc, qa] over the
    # queries [qa, qb, qc] cross three times; [qa, qb | qc] and [qa, qb, qc] not at all.
    "switches": [
        _switch("initial", ["qa", "qb", "qc"], True, counter=1),
        _switch("in-network", ["qc"], False, counter=0),
        _switch("in-network", ["qa", "qb"], True, counter=1),
        _switch("terminal", ["qb"], True, receivers=1),
        _switch("terminal", ["qc"], False, receivers=0),
        _switch("terminal", ["qa"], False, receivers=0),
    ],
}
CROSSED["switches"][0]["other_queries"] = 4


def _crossings_in_answer_order(network: dict) -> int:
    """Crossings of the naive drawing: each column in the order the API lists it."""
    columns = [[set(network["queries"])]]
    for kind in ("initial", "in-network", "terminal"):
        columns.append([set(s["queries"]) for s in network["switches"] if s["kind"] == kind])
    columns.append([{q} for q in network["queries"]])
    crossed = 0
    for left, right in itertools.pairwise(columns):
        edges = [(i, j) for i, a in enumerate(left) for j, b in enumerate(right) if a & b]
        crossed += sum(
            (i - k) * (j - m) < 0 for n, (i, j) in enumerate(edges) for k, m in edges[n + 1 :]
        )
    return crossed


CROSSING_LINES = """() => [...document.querySelectorAll('svg.network')].map((svg) => {
    const lines = [...svg.querySelectorAll('line.edge')].map((l) =>
        ['x1', 'y1', 'x2', 'y2'].map((a) => Number(l.getAttribute(a))));
    const turn = (a, b, c) =>
        Math.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]));
    let crossed = 0;
    for (let i = 0; i < lines.length; i += 1) for (let j = i + 1; j < lines.length; j += 1) {
        const [p, q] = [lines[i].slice(0, 2), lines[i].slice(2)];
        const [r, s] = [lines[j].slice(0, 2), lines[j].slice(2)];
        if (turn(p, q, r) * turn(p, q, s) < 0 && turn(r, s, p) * turn(r, s, q) < 0) crossed += 1;
    }
    return [lines.length, crossed];
})"""


def test_the_network_is_drawn_without_crossings_and_says_why_a_switch_is_off(
    sized_console,
) -> None:
    """The API's answer is substituted (a real network's order is whatever PrS made);
    the drawing, its table and the page's width are the console's own."""
    assert _crossings_in_answer_order(CROSSED) == 3
    sized_console.login("joe", ["ADMIN"])
    page = sized_console.page
    page.route("**/networks", lambda route: route.fulfill(json={"networks": [CROSSED]}))
    sized_console.open("#/networks")
    page.wait_for_selector("section[data-network='vitals'] svg.network")
    assert page.evaluate(CROSSING_LINES) == [[1 + 2 + 3 + 3, 0]]
    rows = page.locator("table.switches tbody tr").evaluate_all(
        "rs => rs.map((r) => [...r.cells].slice(0, 3).map((c) => c.textContent))"
    )
    assert rows[0] == ["initial", "qa, qb, qc (and 4 queries of other users)", "on"]
    assert ["terminal", "qc", "off: no subscriber"] in rows
    off = page.locator("svg.network g.switch[data-open='false']")
    assert off.count() == 3
    assert all("no subscriber" in t for t in off.all_text_contents())
    assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0
    snap(page, f"networks-layered-{sized_console.width}")
    page.unroute("**/networks")

"""The console's administration pages in a real browser (issue 16, second slice).

Shares the package's server and browser with test_console (runs after it: names here are
its own, and nothing assumes a fresh catalog). An administrator builds a role, a grant and
a user in the console; the user then logs in in her own browser context and is offered
only what her roles allow; forcing the administration pages shows the API's refusals.
"""

from __future__ import annotations

import pytest

from tests.console.conftest import snap

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
    assert page.locator("#nav a").all_text_contents()[-3:] == ["Users", "Roles", "Grants"]

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
    assert nora.locator("#nav a").all_text_contents() == ["Catalog", "My audit trail"]
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

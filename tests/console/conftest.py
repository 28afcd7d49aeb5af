"""A real server over TLS and Debian's Chromium driven by Playwright, one of each for the
package (the modules share them: a server start is most of a module's cost; later
modules must not assume a fresh catalog).

Browser downloads are impossible here, so Playwright drives ``/usr/bin/chromium`` (the
Debian package, installed here when missing, as tests/db installs PostgreSQL; the tests
skip, saying why, only when it cannot be had) with the flags a closed network needs.
The browser trusts exactly the server's self-signed key
(``--ignore-certificate-errors-spki-list``), not any certificate.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from streamshield.catalog.throttle import ThrottlePolicy
from tests.server.conftest import PASSWORD, Server, grant, ok, start_server, stop_server
from tests.spark.conftest import spark  # noqa: F401  (the one session-scoped Spark fixture)

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = os.environ.get("STREAMSHIELD_CONSOLE_SHOTS")
"""A directory: the tests then save screenshots of the main pages there (docs/console)."""
ZONE = "America/New_York"
USERS = {
    "joe": ["ADMIN"],
    "al": ["CUSTOMER1"],
    "mallory": ["OTHER"],
}


def _install_chromium() -> str | None:
    """Installs Debian's chromium once (as tests/db does PostgreSQL); returns why not
    when that is impossible. Playwright cannot download a browser here."""
    if os.geteuid() != 0:
        return (
            "Debian's chromium is missing and installing it needs root (apt-get install chromium)"
        )
    if shutil.which("apt-get") is None:
        return "Debian's chromium is missing and apt-get is not available"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"env": env, "capture_output": True, "text": True, "check": False}
    install = ["apt-get", "install", "-y", "-qq", "chromium"]
    done = subprocess.run(install, **quiet)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], **quiet)
        done = subprocess.run(install, **quiet)
    if done.returncode != 0:
        return f"apt-get install chromium failed: {done.stderr.strip()[-300:]}"
    return None if Path(CHROMIUM).exists() else f"chromium was installed but {CHROMIUM} is missing"


def spki_hash(cert: Path) -> str:
    """base64(sha256(SubjectPublicKeyInfo)): what Chromium's SPKI allow-list takes."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


@pytest.fixture(scope="package")
def console_server(spark, tmp_path_factory) -> Iterator[Server]:  # noqa: F811
    if not Path(CHROMIUM).exists():
        reason = _install_chromium()
        if reason is not None:
            pytest.skip(reason)
    root = tmp_path_factory.mktemp("console")
    throttle = ThrottlePolicy(free_failures=20, window=60.0, base_delay=1.0, max_delay=2.0)
    started = start_server(root, spark, USERS, throttle=throttle, session_ttl=600.0)
    yield started
    stop_server(started)


@pytest.fixture(scope="package")
def browser(console_server: Server) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    trust = f"--ignore-certificate-errors-spki-list={spki_hash(console_server.cert)}"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=[*FLAGS, trust])
        yield launched
        launched.close()


INTERVALS = """(() => {
    const live = new Set();
    const set = window.setInterval.bind(window);
    const clear = window.clearInterval.bind(window);
    window.setInterval = (...args) => { const id = set(...args); live.add(id); return id; };
    window.clearInterval = (id) => { live.delete(id); clear(id); };
    window.__intervals = () => live.size;
})();"""
"""Counts the page's live intervals (``window.__intervals()``): a view that polls must
clear its timer when it is left or redrawn."""

WIDE, NARROW = 1366, 390
"""The two widths the console is checked at: a laptop, and a phone (its header folds)."""


class Console:
    """One browser context (its own memory, storage and cookies) on the console."""

    def __init__(self, browser, server: Server, width: int = WIDE) -> None:
        # A zone other than the server's UTC, so that local times are visibly converted.
        self.width = width
        self.context = browser.new_context(
            viewport={"width": width, "height": 900}, locale="en-US", timezone_id=ZONE
        )
        self.context.set_default_timeout(30_000)
        self.context.add_init_script(INTERVALS)
        self.page = self.context.new_page()
        self.server = server
        self.tokens: list[str] = []
        self.paths: list[str] = []  # the path of every request the page made, in order
        self.log: list[str] = []  # the page's console and errors, shown when a test fails
        self.page.on("request", self._saw)
        self.page.on("console", lambda m: self.log.append(f"console.{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.log.append(f"page error: {e}"))

    def _saw(self, request) -> None:
        self.paths.append(urlsplit(request.url).path)
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and header[7:] not in self.tokens:
            self.tokens.append(header[7:])

    def open(self, hash_: str = "") -> None:
        self.page.goto(f"{self.server.url}/console/{hash_}")

    def login(self, user: str, roles: list[str], password: str = PASSWORD) -> None:
        self.open()
        # The tab keeps its session across loads: a logged-in tab logs out first (the
        # button may be folded behind Menu at a narrow width, hence the script click).
        self.page.wait_for_selector("#login-user, #logout", state="attached")
        if self.page.locator("#logout").count():
            self.page.evaluate("() => document.getElementById('logout').click()")
        self.page.fill("#login-user", user)
        self.page.fill("#login-password", password)
        self.page.fill("#login-roles", ", ".join(roles))
        self.page.click("#login button[type=submit]")
        if password == PASSWORD:
            # Attached, not visible: at a narrow width the header folds it behind Menu.
            self.page.wait_for_selector("#who-user", state="attached")

    def close(self) -> None:
        self.context.close()


def reader_stream(joe, stream: str, attributes: list, role: str = "CUSTOMER1") -> None:
    """Joe's input stream ``stream`` (schema ``<stream>_s``, tuple id ``id``) which
    ``role`` sees and reads, with VIEW CATALOG and ADD on SYSTEM (it may add queries)."""
    schema = {"name": f"{stream}_s", "attributes": attributes, "tid": "id"}
    ok(joe.post("/schemas", json=schema), 201)
    ok(joe.post("/streams", json={"name": stream, "schema": schema["name"]}), 201)
    for permission, kind, obj in (
        ("VIEW OBJECT", "stream", stream),
        ("READ TUPLE", "stream", stream),
        ("VIEW CATALOG", "system", "system"),
        ("ADD", "system", "system"),
    ):
        grant(joe, permission, kind, obj, role)


def snap(page, name: str) -> None:
    """A screenshot for the docs, only when STREAMSHIELD_CONSOLE_SHOTS names a directory."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def tail_rows(page) -> list[dict[str, list[str]]]:
    """The tail's rows: column -> (cell class, cell text)."""
    return page.evaluate(
        """() => {
            const table = document.getElementById('tail');
            if (!table) return [];
            const heads = [...table.tHead.rows[0].cells].map((c) => c.textContent);
            return [...table.tBodies[0].rows].map((r) => Object.fromEntries(
                [...r.cells].map((c, i) => [heads[i], [c.className, c.textContent]])));
        }"""
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.call_failed = report.failed
    return report


def _opened(request, browser, server: Server, which: str, width: int = WIDE) -> Iterator[Console]:
    opened = Console(browser, server, width)
    yield opened
    if getattr(request.node, "call_failed", False):
        # What the page showed and logged: the first thing to look at when a test fails.
        shot = request.config._tmp_path_factory.mktemp("shots") / f"{which}.png"
        opened.page.screenshot(path=str(shot), full_page=True)
        print(f"{which}: screenshot {shot}\n" + "\n".join(opened.log))
    opened.close()


@pytest.fixture
def console(request, browser, console_server) -> Iterator[Console]:
    yield from _opened(request, browser, console_server, "console")


@pytest.fixture
def second_console(request, browser, console_server) -> Iterator[Console]:
    yield from _opened(request, browser, console_server, "second_console")


@pytest.fixture
def narrow_console(request, browser, console_server) -> Iterator[Console]:
    """A console on a phone-sized viewport (390 px)."""
    yield from _opened(request, browser, console_server, "narrow_console", NARROW)


@pytest.fixture(params=[WIDE, NARROW], ids=["1366px", "390px"])
def sized_console(request, browser, console_server) -> Iterator[Console]:
    """A console at each of the two widths, one test run per width."""
    yield from _opened(request, browser, console_server, f"console_{request.param}", request.param)

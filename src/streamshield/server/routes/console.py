"""The web console: static files shipped in the package, served on the API's own port.

The console holds no privilege of its own. It is plain HTML, CSS and ES modules (no
build step, nothing from a CDN) that call the same API as every other client with the
user's bearer token, so the server's checks are the only checks that matter.

Every console response carries a strict Content-Security-Policy: scripts and styles
from this origin only (no inline script, no ``eval``), connections to this origin only,
no frames, no form posts, and Trusted Types with no policy, so that a string can never
become HTML through ``innerHTML`` even by mistake (the browser throws instead). Only
files that exist in the package's ``console`` directory at start-up are served; a path
is looked up in that fixed table, never joined onto the file system.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from streamshield.server.errors import NotFound

PREFIX = "/console"

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    # Assets change with the package; revalidating is cheap on loopback and avoids a
    # stale module graph after an upgrade.
    "Cache-Control": "no-cache",
}

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}


def assets(directory: str = "console") -> dict[str, tuple[bytes, str]]:
    """Every servable file of one of the package's asset directories (the console's by
    default): relative path -> (bytes, media type). Read once, so a request never
    touches the file system."""
    found: dict[str, tuple[bytes, str]] = {}
    root = resources.files("streamshield.server").joinpath(directory)

    def walk(directory, prefix: str) -> None:
        for entry in directory.iterdir():
            name = f"{prefix}{entry.name}"
            if entry.is_dir():
                walk(entry, f"{name}/")
                continue
            suffix = "." + entry.name.rpartition(".")[2]
            if suffix in TYPES:
                found[name] = (entry.read_bytes(), TYPES[suffix])

    walk(root, "")
    return found


def router() -> APIRouter:
    """``/console`` (the page) and ``/console/<asset>``; not part of the API document."""
    api = APIRouter(include_in_schema=False)
    files = assets()

    def serve(path: str) -> Response:
        if path not in files:
            raise NotFound("no such console file")
        body, media_type = files[path]
        return Response(body, media_type=media_type, headers=HEADERS)

    @api.get(PREFIX)
    def console_root() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=308)

    @api.get(f"{PREFIX}/")
    def console_page() -> Response:
        return serve("index.html")

    @api.get(PREFIX + "/{path:path}")
    def console_asset(path: str) -> Response:
        return serve(path)

    return api

"""The pages a person opens first: ``/`` (the console) and ``/docs`` (the API).

``/docs`` is Swagger UI over ``/openapi.json``, from the package's own copy
(``server/swagger_ui``, see its VERSION.txt): it works offline and nothing of the page
comes from, or goes to, another host. Its files are served apart from the console's,
which keep their stricter rules (no inline script, no HTML sinks); like those, only the
files found in the package at start-up are served, looked up in a fixed table.

The page has a Content-Security-Policy of its own: scripts from this server only, and
the one inline script that starts Swagger UI by its hash. The console's token lives in
its tabs' ``sessionStorage`` and is handed to a new console tab on this origin
(``BroadcastChannel``): no script on any page of the origin may come from elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import RedirectResponse, Response

from streamshield.server.errors import NotFound
from streamshield.server.routes.console import PREFIX, assets

SWAGGER_UI = "/docs/swagger-ui"
SWAGGER_PARAMETERS = {"validatorUrl": None}
"""FastAPI's Swagger UI settings but one: Swagger UI's default asks validator.swagger.io
to check the document (a badge image from the Internet)."""
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


def docs_policy(page: bytes) -> str:
    """The page's CSP: its inline scripts allowed by their SHA-256, nothing else inline;
    styles may be inline (Swagger UI sets them on its elements)."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(body).digest()).decode()}'"
        for body in _INLINE_SCRIPT.findall(page)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    )


def router() -> APIRouter:
    """``/``, ``/docs`` and ``/docs/swagger-ui/<file>``; not part of the API document."""
    api = APIRouter(include_in_schema=False)
    files = assets("swagger_ui")

    @api.get("/")
    def front() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    @api.get("/docs")
    def api_docs() -> Response:
        page = get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="streamshield API",
            swagger_js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=f"{PREFIX}/favicon.svg",
            swagger_ui_parameters=SWAGGER_PARAMETERS,
        )
        policy = docs_policy(bytes(page.body))
        page.headers.update(
            {**HEADERS, "X-Frame-Options": "DENY", "Content-Security-Policy": policy}
        )
        return page

    @api.get(SWAGGER_UI + "/{path}")
    def swagger_asset(path: str) -> Response:
        if path not in files:
            raise NotFound("no such documentation file")
        body, media_type = files[path]
        return Response(body, media_type=media_type, headers=HEADERS)

    return api

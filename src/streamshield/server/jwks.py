"""An issuer's signing keys (its JWKS), fetched over HTTPS and kept for a while.

Why each rule:

* HTTPS only, checked against the configured CA (or the system's): whoever can answer
  the JWKS request can sign tokens for every user.
* The whole set is replaced at each fetch, so a key the issuer stopped publishing (a
  retired or compromised one) is refused from the next fetch on, never kept by us.
* A token naming a key id we do not know makes us fetch again (the issuer may have
  rotated), but at most once per ``jwks_refresh_seconds``: a flood of tokens with
  made-up ids costs the IdP one request per interval, not one per token.
* Symmetric keys (``kty`` "oct") and keys marked for encryption are never used: a
  published HMAC key would let anyone sign.
* A failed fetch keeps the set already held (an IdP outage does not log everyone out)
  and is tried again at the next due time; a server that never fetched a set refuses
  every token.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from joserfc.jwk import Key, import_key

from streamshield.server.oidc_settings import OidcIssuer

log = logging.getLogger("streamshield.server")
MAX_DOCUMENT_BYTES = 1 << 20
"""A discovery document or a JWKS larger than this is refused (a few keys are ~2 KB)."""
FETCH_SECONDS = 5.0

Fetch = Callable[[str], dict[str, Any]]


class FetchFailed(Exception):
    """A discovery document or JWKS could not be had (the message says why, no secret)."""


def https_fetcher(ca_file: str | None) -> Fetch:
    """GET of a JSON object over HTTPS, verified against ``ca_file`` (None: the system's
    CAs), no redirects followed, at most :data:`MAX_DOCUMENT_BYTES`."""
    context = ssl.create_default_context(cafile=ca_file)

    def fetch(url: str) -> dict[str, Any]:
        if not url.startswith("https://"):
            raise FetchFailed("not an https:// URL")
        try:
            with (
                httpx.Client(verify=context, timeout=FETCH_SECONDS) as http,
                http.stream("GET", url, headers={"Accept": "application/json"}) as answer,
            ):
                if answer.status_code != 200:
                    raise FetchFailed(f"answered {answer.status_code}")
                body = b""
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise FetchFailed("document too large")
        except httpx.HTTPError as err:
            raise FetchFailed(type(err).__name__) from None
        try:
            document = json.loads(body)
        except ValueError:
            raise FetchFailed("not JSON") from None
        if not isinstance(document, dict):
            raise FetchFailed("not a JSON object")
        return document

    return fetch


def signing_keys(document: dict[str, Any]) -> dict[str | None, Key]:
    """The usable signing keys of a JWKS document by ``kid`` (a key without one under
    None); symmetric, encryption-only and unreadable keys are left out."""
    keys: dict[str | None, Key] = {}
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise FetchFailed("no 'keys' list")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC"):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        try:
            key = import_key(entry)
        except Exception:  # joserfc raises several types for a malformed key
            continue
        if key.is_private:
            key = import_key(key.as_dict(private=False))  # we only ever verify
        keys[entry.get("kid") if isinstance(entry.get("kid"), str) else None] = key
    return keys


class KeySet:
    """One issuer's signing keys, fetched on first use and kept for
    ``jwks_cache_seconds``; :meth:`key` fetches again for an unknown id, rate-limited."""

    def __init__(
        self,
        issuer: OidcIssuer,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self._fetch = fetch or https_fetcher(str(issuer.ca_file) if issuer.ca_file else None)
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, Key] = {}
        self._fetched_at: float | None = None  # last successful fetch
        self._tried_at: float | None = None  # last attempt, successful or not
        self.fetches = 0  # attempts, for tests and metrics

    def key(self, kid: str | None) -> Key | None:
        """The key ``kid`` names (None: unknown to the issuer as of the latest fetch)."""
        with self._lock:
            now = self._clock()
            stale = (
                self._fetched_at is None or now - self._fetched_at >= self.issuer.jwks_cache_seconds
            )
            if stale and self._may_try(now):
                self._refresh(now)
            found = self._keys.get(kid)
            if found is None and self._may_try(now):
                self._refresh(now)  # rotated since the last fetch?
                found = self._keys.get(kid)
            return found

    def _may_try(self, now: float) -> bool:
        return self._tried_at is None or now - self._tried_at >= self.issuer.jwks_refresh_seconds

    def _refresh(self, now: float) -> None:
        self._tried_at = now
        self.fetches += 1
        try:
            self._keys = signing_keys(self._fetch(self._jwks_url()))
            self._fetched_at = now
        except FetchFailed as err:
            log.warning("JWKS of %s not fetched: %s", self.issuer.issuer, err)

    def _jwks_url(self) -> str:
        if self.issuer.jwks_url is not None:
            return self.issuer.jwks_url
        document = self._fetch(self.issuer.discovery_url)
        if document.get("issuer") != self.issuer.issuer:
            raise FetchFailed("the discovery document names another issuer")
        url = document.get("jwks_uri")
        if not isinstance(url, str) or not url.startswith("https://"):
            raise FetchFailed("the discovery document has no https jwks_uri")
        return url

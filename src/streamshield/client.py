"""The API client the CLI uses: httpx over TLS, the session token kept in a 0600 file.

The server's certificate is verified, always: against the system trust store, or
against the file given with ``--ca`` (the embedded default's self-signed certificate,
``<root>/tls/server-cert.pem``). There is no switch to turn verification off.

The token file lives under ``$STREAMSHIELD_HOME`` (default ``~/.config/streamshield``),
created 0600 inside a 0700 directory, and stores the server URL and CA path with it
so that later commands need neither.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from streamshield.durable import write_atomic

TOKEN_FILE = "session.json"
TIMEOUT = httpx.Timeout(30.0, read=120.0)
CHUNK_BYTES = 1024 * 1024
"""Bytes per ingest request: well below the server's 4 MiB body limit (body_limit.py)."""


class ClientError(Exception):
    """A refused request: the server's status and its (safe) message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class LocalFileError(Exception):
    """A local file the client needs is unreadable (saved session, CA certificate)."""


def home() -> Path:
    configured = os.environ.get("STREAMSHIELD_HOME")
    return Path(configured) if configured else Path.home() / ".config" / "streamshield"


@dataclass
class Saved:
    url: str
    token: str | None = None
    ca: str | None = None
    user: str | None = None


def load_saved(directory: Path | None = None) -> Saved | None:
    path = (directory or home()) / TOKEN_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        saved = Saved(data["url"], data.get("token"), data.get("ca"), data.get("user"))
    except (OSError, ValueError, KeyError, TypeError):
        raise LocalFileError(
            f"the saved session {path} is unreadable: run 'streamshield client login' again"
        ) from None
    if not isinstance(saved.url, str) or not all(
        isinstance(v, str | None) for v in (saved.token, saved.ca, saved.user)
    ):
        raise LocalFileError(
            f"the saved session {path} is malformed: run 'streamshield client login' again"
        )
    return saved


def save(saved: Saved, directory: Path | None = None) -> Path:
    """Writes the token file 0600 (created so before the token is written)."""
    directory = directory or home()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / TOKEN_FILE
    write_atomic(path, json.dumps(saved.__dict__), mode=0o600)
    return path


def forget(directory: Path | None = None) -> None:
    ((directory or home()) / TOKEN_FILE).unlink(missing_ok=True)


class Client:
    """One server, one optional token; every method returns the decoded JSON answer."""

    def __init__(self, url: str, token: str | None = None, ca: str | None = None) -> None:
        self.url, self.token, self.ca = url.rstrip("/"), token, ca
        verify: Any = True
        if ca:
            import ssl

            try:
                verify = ssl.create_default_context(cafile=ca)
            except (OSError, ssl.SSLError) as err:
                raise LocalFileError(f"CA certificate {ca} is unreadable: {err}") from None
        self._http = httpx.Client(base_url=self.url, verify=verify, timeout=TIMEOUT)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, headers=self._headers(), **kwargs)
        return _decoded(response)

    # -- endpoints -------------------------------------------------------------------------

    def login(self, user: str, password: str, roles: list[str], level: str | None = None) -> dict:
        body: dict[str, Any] = {"user": user, "password": password, "roles": roles}
        if level is not None:
            body["level"] = level  # a Chinese-Wall level, e.g. "[1, B]"
        answer = self.request("POST", "/login", json=body)
        self.token = answer["token"]
        return answer

    def logout(self) -> dict:
        return self.request("POST", "/logout")

    def catalog(self) -> dict:
        return self.request("GET", "/catalog")

    def stream(self, name: str) -> dict:
        return self.request("GET", f"/streams/{name}")

    def add_schema(
        self,
        name: str,
        attributes: Sequence[Sequence[str]],
        tid: str,
        event_time: str | None,
        not_null: Sequence[str] = (),
        tags: Mapping[str, Sequence[str]] | None = None,
    ) -> dict:
        body = {
            "name": name,
            "attributes": [list(a) for a in attributes],
            "tid": tid,
            "event_time": event_time,
            "not_null": list(not_null),
            "tags": {a: list(t) for a, t in (tags or {}).items()},
        }
        return self.request("POST", "/schemas", json=body)

    def set_tags(self, stream: str, tags: Mapping[str, Sequence[str]]) -> dict:
        """Replaces a stream's attribute tags (an administrator's)."""
        body = {"tags": {a: list(t) for a, t in tags.items()}}
        return self.request("PUT", f"/streams/{quote(stream, safe='')}/tags", json=body)

    def set_server_policy(self, scope: str, cql: str, mode: str = "intersect") -> dict:
        """Stores the server policy of a stream or a stream-name glob (an administrator's)."""
        path = f"/server-policies/{quote(scope, safe='')}"
        return self.request("PUT", path, json={"cql": cql, "mode": mode})

    def server_policies(self) -> list:
        return list(self.request("GET", "/server-policies")["policies"])

    def add_stream(self, name: str, schema: str) -> dict:
        return self.request("POST", "/streams", json={"name": name, "schema": schema})

    def append(self, stream: str, lines: Iterable[str], assign: bool = False) -> dict:
        """``assign``: the server assigns seqs per channel (lines must carry none)."""
        body = "\n".join(line.rstrip("\n") for line in lines) + "\n"
        headers = {**self._headers(), "Content-Type": "application/x-ndjson"}
        params = {"assign": "seq"} if assign else None
        response = self._http.post(
            f"/streams/{stream}/elements", content=body, headers=headers, params=params
        )
        return _decoded(response)

    def append_chunked(
        self,
        stream: str,
        lines: Iterable[str],
        max_bytes: int = CHUNK_BYTES,
        assign: str = "auto",
    ) -> Iterator[tuple[int, dict]]:
        """Appends in requests of at most ``max_bytes`` (below the server's body limit);
        yields each chunk's first line number and the server's answer, whose rejection
        line numbers are made absolute. A line too long for any request is reported as
        rejected here and never sent. ``assign``: ``yes`` (the server assigns seqs),
        ``no``, or ``auto`` (per chunk: when none of its lines carries a seq)."""
        for first, chunk, too_long in chunks(lines, max_bytes):
            if chunk:
                server_seqs = assign == "yes" or (assign == "auto" and not _has_seqs(chunk))
                answer = self.append(stream, chunk, server_seqs)
                for rejection in answer.get("rejections", []):
                    rejection["line"] = first + int(rejection["line"]) - 1
            else:
                answer = {"accepted": 0, "rejected": 0, "rejections": []}
            for number in too_long:
                answer["rejected"] += 1
                answer["rejections"].append(
                    {
                        "line": number,
                        "reason": "too_long",
                        "message": f"the line is longer than {max_bytes} bytes",
                    }
                )
            yield first, answer

    def register(self, name: str, text: str) -> dict:
        return self.request("POST", "/queries", json={"name": name, "text": text})

    def set_status(self, name: str, running: bool) -> dict:
        return self.request("POST", f"/queries/{name}/{'start' if running else 'stop'}")

    def remove(self, name: str) -> dict:
        return self.request("DELETE", f"/queries/{name}")

    def grant(self, body: dict, revoke: bool = False) -> dict:
        return self.request("DELETE" if revoke else "POST", "/grants", json=body)

    def settings(self) -> dict:
        return self.request("GET", "/system/settings")

    def set_settings(self, values: dict) -> dict:
        return self.request("PUT", "/system/settings", json={"values": values})

    def audit(self, **filters: Any) -> dict:
        params = {k: v for k, v in filters.items() if v is not None}
        return self.request("GET", "/audit", params=params)

    def subscribe(self, name: str, after: int | None = None) -> Iterator[tuple[str, dict]]:
        """(event, data) pairs of a live subscription, as they arrive; ``after``: first
        the stored batches after that batch id (-1: every stored batch)."""
        with self._http.stream(
            "GET",
            f"/queries/{name}/subscribe",
            params=None if after is None else {"after": after},
            headers=self._headers(),
            timeout=httpx.Timeout(30.0, read=None),
        ) as response:
            if response.status_code != 200:
                response.read()
                _decoded(response)
            yield from parse_sse(response.iter_lines())


def chunks(
    lines: Iterable[str], max_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[int, list[str], list[int]]]:
    """``(first line number, lines, too-long line numbers)`` batches of at most
    ``max_bytes`` UTF-8 bytes each. Blank lines keep their numbers (the server skips
    them), so the server's per-chunk line numbers map back to the file's."""
    first, size = 1, 0
    batch: list[str] = []
    too_long: list[int] = []
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        cost = len(line.encode("utf-8")) + 1
        if cost > max_bytes:
            too_long.append(number)
            line, cost = "", 1  # keeps the numbering of the lines after it
        if batch and size + cost > max_bytes:
            yield first, batch, [n for n in too_long if n < number]
            first, batch, size, too_long = number, [], 0, [n for n in too_long if n >= number]
        batch.append(line)
        size += cost
    if batch or too_long:
        yield first, batch, too_long


def _has_seqs(lines: Iterable[str]) -> bool:
    """Whether any line is a JSON object with a ``seq`` (unparseable lines do not count)."""
    for line in lines:
        if '"seq"' not in line:
            continue
        try:
            element = json.loads(line)
        except ValueError:
            continue
        if isinstance(element, dict) and "seq" in element:
            return True
    return False


def parse_sse(lines: Iterable[str]) -> Iterator[tuple[str, dict]]:
    """Server-sent events from text lines; comments (pings) are skipped."""
    event = "message"
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def _decoded(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        body = {"error": "unreadable", "message": response.text[:200]}
    if response.status_code >= 400:
        raise ClientError(
            response.status_code,
            str(body.get("error", "error")),
            str(body.get("message", "")),
        )
    return body


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    """Rows as an aligned text table (the CLI's readable output)."""
    if not rows:
        return "(none)"
    columns = columns or list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    head = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([head, rule, *body])


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)

"""``streamshield serve`` end to end: a subprocess on a temporary root and a free port;
log in with the credentials it printed the path of, subscribe, receive a row, stop it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading

import httpx
import pytest

from streamshield.client import parse_sse
from tests.server.conftest import poll

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_end_to_end(tmp_path) -> None:
    root, port = tmp_path / "root", _free_port()
    command = [sys.executable, "-m", "streamshield.cli", "serve", "--root", str(root)]
    command += ["--port", str(port), "--round-seconds", "1"]
    server = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(server.stdout), daemon=True)
    reader.start()
    rows: list[dict] = []
    try:
        poll(lambda: any("streamshield server at" in line for line in output), timeout=240)
        cert = root / "tls" / "server-cert.pem"
        passwords = json.loads((root / "example-credentials.json").read_text())
        assert (root / "example-credentials.json").stat().st_mode & 0o777 == 0o600
        context = ssl.create_default_context(cafile=str(cert))
        url = f"https://127.0.0.1:{port}"
        with httpx.Client(base_url=url, verify=context, timeout=60) as http:
            body = {"user": "nina", "password": passwords["nina"], "roles": ["ND"]}

            def login() -> str | None:
                try:  # "server at" is printed just before uvicorn binds the port
                    return http.post("/login", json=body).json()["token"]
                except httpx.ConnectError:
                    return None

            token = poll(login, timeout=60)
            headers = {"Authorization": f"Bearer {token}"}

            def subscribe() -> None:
                with http.stream(
                    "GET",
                    "/queries/heart_nina_out/subscribe",
                    headers=headers,
                    timeout=httpx.Timeout(30, read=None),
                ) as response:
                    for event, data in parse_sse(response.iter_lines()):
                        if event == "rows":
                            rows.extend(data["rows"])
                            return

            listener = threading.Thread(target=subscribe, daemon=True)
            listener.start()
            poll(lambda: rows, timeout=240)
        assert {"patient_id", "beats_per_min"} <= set(rows[0])
        assert not any(key.startswith("_ss_") for key in rows[0])
    finally:
        server.send_signal(signal.SIGINT)
        try:
            code = server.wait(120)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert code == 0, "".join(line for line in output if not line.startswith("\tat "))[-3000:]

"""A real MQTT broker for the tests: Mosquitto, a process of the test's own.

Debian's ``mosquitto`` package is installed when its binary is missing and the tests
run as root (as ``tests/db/conftest.py`` installs PostgreSQL); otherwise the tests that
need it skip, saying why. The broker never is the system service: each one listens on
a free loopback port with a config file in a temporary directory, persistence on (so
sessions survive a broker restart as they would in production), and is ended by
:meth:`MosquittoBroker.stop`. The tests publish with paho-mqtt, the client the server
uses.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from bench.server_process import free_port

BINARY_PLACES = ("/usr/sbin/mosquitto", "/usr/bin/mosquitto")


def mosquitto_binary() -> str | None:
    for place in BINARY_PLACES:
        if os.access(place, os.X_OK):
            return place
    return shutil.which("mosquitto")


def _install() -> str | None:
    """Installs Debian's mosquitto; returns why not when that is impossible."""
    if os.geteuid() != 0:
        return "mosquitto is missing and installing it needs root"
    if shutil.which("apt-get") is None:
        return "mosquitto is missing and apt-get is not available"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"env": env, "capture_output": True, "text": True, "check": False}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "mosquitto"]
    done = subprocess.run(install, **quiet)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], **quiet)
        done = subprocess.run(install, **quiet)
    if done.returncode != 0:
        return f"apt-get install mosquitto failed: {done.stderr.strip()[-300:]}"
    return None


def require_mosquitto() -> str:
    """The broker's binary, installed if need be; skips the test when it cannot be had."""
    binary = mosquitto_binary()
    if binary is None:
        reason = _install()
        if reason is not None:
            pytest.skip(reason)
        binary = mosquitto_binary()
        if binary is None:
            pytest.skip("mosquitto was installed but its binary was not found")
    return binary


class MosquittoBroker:
    """One broker process on a free loopback port; :meth:`stop` ends it, :meth:`start`
    starts it again on the same port and persistence directory."""

    def __init__(self, directory: Path) -> None:
        self.binary = require_mosquitto()
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.host = "127.0.0.1"
        self.config = directory / "mosquitto.conf"
        self.config.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "persistence true\n"
            f"persistence_location {directory}/\n"
            "autosave_interval 1\n"
            "max_queued_messages 0\n"
            f"log_dest file {directory}/mosquitto.log\n"
            # as root mosquitto would drop to its own user, who cannot write a test's
            # private temporary directory
            + ("user root\n" if os.geteuid() == 0 else "")
        )
        self._process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self._process = subprocess.Popen(
            [self.binary, "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    raise RuntimeError("mosquitto did not start") from None
                time.sleep(0.05)

    def publish(self, topic: str, payloads: list[bytes | str | dict], qos: int = 1) -> None:
        """Each payload as one message on ``topic``, in order, acknowledged by the broker."""
        from paho.mqtt.client import Client
        from paho.mqtt.enums import CallbackAPIVersion

        client = Client(CallbackAPIVersion.VERSION2)
        client.connect(self.host, self.port)
        client.loop_start()
        try:
            for payload in payloads:
                if isinstance(payload, dict):
                    payload = json.dumps(payload)
                client.publish(topic, payload, qos=qos).wait_for_publish(30)
        finally:
            client.disconnect()
            client.loop_stop()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)

"""A real OpenID Connect issuer for the tests: discovery and JWKS over TLS.

A certificate authority made for the test run signs the issuer's certificate for
127.0.0.1; the server under test trusts that CA only (``ca_file``). Keys are made
here, tokens are signed here with joserfc, and what the JWKS publishes can be changed
while it runs (rotation). It also answers the device-code flow (RFC 8628) with a token
the test sets, for the CLI.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

AUDIENCE = "streamshield"


def make_ca(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) files, PEM; the server's is
    for 127.0.0.1 and signed by the CA."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test IdP CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "idp-cert.pem", directory / "idp-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class Issuer:
    """The running issuer: ``url(realm)`` is a realm's issuer URL; ``published`` the keys
    its JWKS lists now (private keys kept here, public parts served)."""

    def __init__(self, directory: Path) -> None:
        self.ca, cert, key = make_ca(directory)
        self.keys: dict[str, RSAKey | ECKey] = {
            "rsa-1": RSAKey.generate_key(2048, parameters={"kid": "rsa-1"}),
            "ec-1": ECKey.generate_key("P-256", parameters={"kid": "ec-1"}),
            "rsa-2": RSAKey.generate_key(2048, parameters={"kid": "rsa-2"}),
        }
        self.published = {"rsa-1", "ec-1"}
        self.jwks_requests = 0
        self.device_token: str | None = None  # what the device flow's token endpoint gives
        self.device_polls = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:
                realm, _, rest = self.path.removeprefix("/realms/").partition("/")
                if rest == ".well-known/openid-configuration":
                    base = issuer.url(realm)
                    self._json(
                        {
                            "issuer": base,
                            "jwks_uri": f"{base}/certs",
                            "device_authorization_endpoint": f"{base}/device",
                            "token_endpoint": f"{base}/token",
                        }
                    )
                elif rest == "certs":
                    issuer.jwks_requests += 1
                    self._json({"keys": issuer.jwks()})
                else:
                    self._json({"error": "not_found"}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = self.rfile.read(length).decode()
                if self.path.endswith("/device") and "client_id=streamshield-cli" in form:
                    self._json(
                        {
                            "device_code": "dev-123",
                            "user_code": "ABCD-EFGH",
                            "verification_uri": "https://127.0.0.1/device",
                            "expires_in": 60,
                            "interval": 0,
                        }
                    )
                elif self.path.endswith("/token") and "device_code=dev-123" in form:
                    issuer.device_polls += 1
                    if issuer.device_polls < 2:  # the user has not approved yet
                        self._json({"error": "authorization_pending"}, 400)
                    else:
                        self._json({"access_token": issuer.device_token, "token_type": "Bearer"})
                else:
                    self._json({"error": "invalid_request"}, 400)

            def _json(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def url(self, realm: str) -> str:
        return f"https://127.0.0.1:{self.port}/realms/{realm}"

    def jwks(self) -> list[dict]:
        return [self.keys[kid].as_dict(private=False) for kid in sorted(self.published)]

    def token(
        self,
        user: str,
        groups: list[str],
        *,
        realm: str = "open",
        kid: str = "rsa-1",
        alg: str | None = None,
        lifetime: float = 300,
        subject: str | None = None,
        **claims: Any,
    ) -> str:
        """A token signed with key ``kid``; ``claims`` add to or replace the usual ones."""
        now = int(time.time())
        body = {
            "iss": self.url(realm),
            "aud": AUDIENCE,
            "sub": subject or f"sub-{user}",
            "preferred_username": user,
            "groups": groups,
            "iat": now,
            "exp": int(now + lifetime),
        }
        body.update(claims)
        key = self.keys[kid]
        algorithm = alg or ("ES256" if isinstance(key, ECKey) else "RS256")
        return jwt.encode({"alg": algorithm, "kid": kid}, body, key, algorithms=[algorithm])

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

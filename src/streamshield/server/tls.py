"""TLS material for the server: a given certificate, or a self-signed one made once.

The embedded default must be encrypted without any set-up (paper 5: ENCRYPTED
TRANSPORT), so on first start a self-signed certificate for the loopback names is
generated with ``cryptography`` and kept under the storage root. The key file is
created with mode 0600 before any byte of the key is written, and both files are
reused on later starts so that clients that trust the certificate keep trusting it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERT_FILE = "server-cert.pem"
KEY_FILE = "server-key.pem"
DEFAULT_NAMES = ("localhost", "127.0.0.1", "::1")
VALID_DAYS = 825


@dataclass(frozen=True)
class TlsFiles:
    """Paths uvicorn needs (``ssl_certfile``/``ssl_keyfile``) and clients trust (``cert``)."""

    cert: Path
    key: Path


def ensure_self_signed(
    directory: str | os.PathLike[str], names: tuple[str, ...] = DEFAULT_NAMES
) -> TlsFiles:
    """The certificate and key under ``directory``, generated on first use, reused after.

    A directory holding only one of the two files is an error rather than a silent
    regeneration: the other half may be what clients already trust.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = TlsFiles(directory / CERT_FILE, directory / KEY_FILE)
    have = files.cert.exists(), files.key.exists()
    if all(have):
        _check_key_mode(files.key)
        return files
    if any(have):
        raise RuntimeError(f"TLS: only one of {files.cert} and {files.key} exists")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(key, names)
    _write_private(
        files.key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


def given(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> TlsFiles:
    """Operator-provided files; they must exist (the server never starts without TLS)."""
    files = TlsFiles(Path(cert), Path(key))
    for path in (files.cert, files.key):
        if not path.is_file():
            raise FileNotFoundError(f"TLS file {path} does not exist")
    return files


def _certificate(key: ec.EllipticCurvePrivateKey, names: tuple[str, ...]) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = dt.datetime.now(dt.UTC)
    alternatives: list[x509.GeneralName] = []
    for name in names:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        # A CA:TRUE self-signed certificate is what clients can pin as their trust anchor.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )


def _write_private(path: Path, data: bytes) -> None:
    """Creates ``path`` as 0600 (exclusively) and only then writes the secret into it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _check_key_mode(path: Path) -> None:
    if path.stat().st_mode & 0o077:
        raise PermissionError(f"TLS key {path} is readable by others; chmod 600 it")

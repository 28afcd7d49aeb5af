"""``streamshield serve``: the server on the embedded default, hospital example running.

Embedded default = SQLite catalog under the storage root, local Spark, a self-signed
certificate made on first start. With the example, a fresh root gets the hospital's
users, stream, grants and queries, and a provider thread keeps landing readings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from streamshield.server.hospital import CLINICIANS, CREDENTIALS, WardProvider, load_example, roles
from streamshield.server.tls import ensure_self_signed, given


def build_service(root: Path, master: str | None, example_roles: bool = False):
    """The service on the embedded default (SQLite catalog at ``<root>/catalog.db``).

    ``example_roles``: store the example's role hierarchy first; the engine reads the
    hierarchy once, when the service is built, so it must be in place before.
    """
    from streamshield.catalog.security import SecurityCatalog
    from streamshield.engine.session import spark_session
    from streamshield.server.service import ServerService

    root.mkdir(parents=True, exist_ok=True)
    spark = spark_session(master)
    spark.sparkContext.setLogLevel("ERROR")
    security = SecurityCatalog(root / "catalog.db")
    if example_roles:
        names, edges = roles()
        security.catalog.set_roles(names, edges)
    return ServerService(spark, root, security)


def run_server(
    root: Path,
    host: str,
    port: int,
    master: str | None,
    cert: Path | None,
    key: Path | None,
    example: bool,
    round_seconds: float,
    echo: Callable[[str], None] = print,
) -> None:
    from streamshield.server.app import create_app
    from streamshield.server.runner import serve

    fresh = not (root / "catalog.db").exists()
    tls = given(cert, key) if cert and key else ensure_self_signed(root / "tls")
    service = build_service(root, master, example_roles=example and fresh)
    provider = None
    if example and fresh:
        echo("loading the hospital example (users, HeartRate stream, grants, queries)...")
        passwords = load_example(service)
    elif example:
        echo(f"existing root {root}: the example is not loaded again")
        path = root / CREDENTIALS
        passwords = json.loads(path.read_text()) if path.exists() else {}
    else:
        passwords = {}
    service.start()
    if example and "ward" in passwords:
        provider = WardProvider(service, passwords["ward"], round_seconds)
        provider.start()
    url = f"https://{host}:{port}"
    echo(f"streamshield server at {url} (TLS certificate {tls.cert})")
    if passwords:
        echo(f"example users' passwords: {root / CREDENTIALS} (0600)")
        echo("log in and subscribe, e.g. as the nurse on duty:")
        echo(
            f'  STREAMSHIELD_PASSWORD=$(python -c "import json;print(json.load(open('
            f"'{root / CREDENTIALS}'))['nina'])\") \\"
        )
        echo(f"    streamshield client login --url {url} --ca {tls.cert} --user nina --role ND")
        echo("  streamshield client catalog")
        echo("  streamshield client subscribe heart_nina_out --limit 10")
        echo(
            f"other users: {', '.join(f'{u} ({r})' for u, r in CLINICIANS.items())}, "
            "admin (ADMIN), ward (PROVIDER)"
        )
    try:
        serve(create_app(service), host, port, tls)
    except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it handled: a clean stop
        echo("stopping")
    finally:
        if provider is not None:
            provider.stop()
        service.stop()

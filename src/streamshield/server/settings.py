"""How ``streamshield serve`` is configured: one typed model, four sources.

Precedence, highest first: command-line options, environment variables
(``STREAMSHIELD_<OPTION>``, e.g. ``STREAMSHIELD_PORT``), a TOML file (``--config`` or
``STREAMSHIELD_CONFIG``), the defaults below. Dictionaries (``spark_conf``) merge
key by key across sources; everything else is replaced whole.

Strict on purpose: an unknown key in the file or a value of the wrong type is refused
with the key named, because a typo silently ignored (``catalog_ulr``) would run the
server on a configuration nobody chose, e.g. a throw-away SQLite catalog instead of
the shared PostgreSQL one.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from streamshield.catalog.view import POLL_SECONDS
from streamshield.engine.store.retention import parse_retention
from streamshield.engine.tuning import EngineTuning
from streamshield.server.oidc_settings import OidcSettings
from streamshield.server.subscriptions import DEFAULT_QUEUE, DEFAULT_QUEUE_BYTES

ENV_PREFIX = "STREAMSHIELD_"
DEFAULT_BACKLOG = 50_000
"""Elements (tuples and sps) landed and not yet read by secure ingest before appends are
refused (:mod:`streamshield.server.ingest_backlog`): a few minutes of the soak's offered
load; an ingest batch of that size is ~10 MB of JSON, small beside the JVM's 2 GB heap."""
DEFAULT_LATENCY_BUDGET = 5.0
"""Seconds a landed element may wait for secure ingest (measured, or predicted from the
backlog and ingest's throughput) before appends are refused: above the served targets'
end-to-end p99 of 1-2 s, well below the minutes an unbounded backlog reaches."""
DEFAULT_RETENTION = "7d"
"""Spark's file sources remember the files they saw for 7 days (``maxFileAge``): keeping
a week of consumed data costs a week of disk and lets a late query start a week back."""
LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names every bad key."""


class ServeSettings(BaseSettings):
    """Every option of ``streamshield serve`` (the README's table lists them)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, frozen=True
    )

    root: Path = Field(
        Path("streamshield-data"), description="Storage root: landing/, store/, checkpoints."
    )
    host: str = Field("127.0.0.1", description="Address the HTTPS API listens on.")
    port: int = Field(8443, ge=0, le=65535, description="Port of the HTTPS API.")
    catalog_url: str | None = Field(
        None,
        description="Security catalog database URL, e.g. postgresql+psycopg://u@h/db "
        "(default: SQLite at <root>/catalog.db).",
    )
    spark_master: str | None = Field(None, description="Spark master URL (default local[2]).")
    spark_conf: dict[str, str] = Field(
        default_factory=dict, description="Extra Spark configuration, key=value."
    )
    spark_ui: bool = Field(False, description="Start Spark's web UI (loopback only).")
    level_applications: Literal["in_process", "separate"] = Field(
        "in_process",
        description="Where a Chinese-Wall level's queries run: in_process (the server's "
        "Spark application, a session, pool and directory per level) or separate (a Spark "
        "application of its own per level: its own driver JVM).",
    )
    level_master: str | None = Field(
        None,
        description="Spark master of the levels' own applications (with separate; "
        "default local[1] inside each level's driver).",
    )
    level_conf: dict[str, str] = Field(
        default_factory=dict,
        description="Spark configuration of the levels' own applications (with separate), "
        "key=value.",
    )
    jvm_class_cache: bool = Field(
        True,
        description="Keep a JVM class-data archive in ~/.cache/streamshield/jvm/ "
        "(XDG_CACHE_HOME respected): later starts are faster.",
    )
    log_level: LogLevel = Field("warning", description="Server log level.")
    tls_cert: Path | None = Field(
        None, description="TLS certificate (PEM); default: self-signed under <root>/tls."
    )
    tls_key: Path | None = Field(None, description="TLS private key (PEM), with tls_cert.")
    example: bool = Field(True, description="Load the hospital example on a fresh root.")
    round_seconds: float = Field(
        5.0, gt=0, description="Seconds between the example providers' rounds."
    )
    max_clock_skew: float = Field(
        300.0,
        gt=0,
        le=86400 * 366,
        description="Seconds an sp's ts may be ahead of the server's clock; later sps are "
        "rejected (future_timestamp), since one would lock its channel.",
    )
    max_ingest_backlog: int = Field(
        DEFAULT_BACKLOG,
        ge=0,
        le=10**9,
        description="Landed elements that may wait for secure ingest; beyond it an append "
        "is answered 503 ingest_backlog with Retry-After and nothing lands (0: no bound).",
    )
    ingest_latency_budget_seconds: float = Field(
        DEFAULT_LATENCY_BUDGET,
        ge=0,
        le=3600,
        description="Seconds landed elements may wait for secure ingest; an append is "
        "answered 503 ingest_backlog with Retry-After while the oldest waiting element "
        "has waited longer, or the backlog would take longer to drain at ingest's recent "
        "throughput, and nothing lands (0: no budget).",
    )
    subscriber_queue_batches: int = Field(
        DEFAULT_QUEUE,
        ge=2,
        le=100_000,
        description="Batches a subscriber may lag behind: past half of it she is told "
        "(an SSE lagging event), past it she is dropped with a reason, so that one slow "
        "reader never holds the server's memory or the others' delivery.",
    )
    subscriber_queue_bytes: int = Field(
        DEFAULT_QUEUE_BYTES,
        ge=64 * 1024,
        le=1 << 34,
        description="Bytes of encoded events a subscriber may lag behind (told past half, "
        "dropped past it; one batch larger than this is still delivered alone).",
    )
    catalog_poll_seconds: float = Field(
        POLL_SECONDS,
        gt=0,
        le=60,
        description="Seconds between looks at the catalog's version for changes made by "
        "another process (another server, the CLI, SQL by hand): a revocation there "
        "reaches this server's subscribers within it; its own changes at once.",
    )
    share_windows: bool = Field(
        True,
        description="Windowed queries over one stream run as branches of its window "
        "network, one window node per shared window (false: each as a window query of "
        "its own; docs/query-sharing.md).",
    )
    fuse_branches: bool = Field(
        True,
        description="A shared network computes the plain selections of its branches in one "
        "pass over each micro-batch, each row stored once and each branch's batch a link "
        "into it (false: each branch runs its own plan and stores its own rows; "
        "docs/query-sharing.md).",
    )
    share_aggregates: bool = Field(
        True,
        description="An aggregate without a window runs as a folding branch of its "
        "stream's selection network, its state kept by the network (false: each as "
        "Spark's streaming aggregation of its own; engine/sharing/aggregate_fold.py, "
        "docs/query-sharing.md).",
    )
    share_sliding: bool = Field(
        True,
        description="A sliding-window aggregate ([RANGE t SLIDE s]) runs as a folding "
        "branch of its stream's selection network too, keyed by its window, Spark's "
        "event-time watermark kept by the fold (false: each as Spark's windowed streaming "
        "aggregation of its own; lang/sliding_fold.py, docs/query-sharing.md).",
    )
    driven_scan: bool = Field(
        True,
        description="A stream's networks read each batch secure ingest commits at once, "
        "by a scan driven by ingest's commit markers (false: through a streaming query "
        "that lists the labelled store; engine/sharing/driven_scan.py).",
    )
    driven_ingest: bool = Field(
        True,
        description="Secure ingest starts a micro-batch as soon as a file lands through "
        "the API (false: at the next 0.2 s trigger of a file-source streaming query; same "
        "checkpoint format and crash rules either way; engine/ingest/driven_ingest.py).",
    )
    # ignore: Field types its default as the field's, but validate_default parses this text
    retention: float | None = Field(  # type: ignore[assignment]
        DEFAULT_RETENTION,
        description="How long consumed landing files and labelled batches are kept: 7d, "
        "12h, 30m, 90s, or 'forever'. Only what secure ingest and every query's "
        "checkpoint have committed past is pruned; a query registered later reads what is "
        "kept (docs/administration.md).",
    )
    metrics_token: str | None = Field(
        None,
        min_length=16,
        description="Bearer token a Prometheus scraper may use for /metrics "
        "(administrators' session tokens always work).",
    )
    oidc: OidcSettings = Field(
        default_factory=OidcSettings,
        description="OpenID Connect issuers whose bearer tokens are accepted "
        "([[oidc.issuers]] tables; docs/security.md, single sign-on).",
    )

    @field_validator("spark_conf", "level_conf", mode="before")
    @classmethod
    def _conf_text(cls, value: Any) -> Any:
        """TOML numbers and booleans are Spark strings (``spark.ui.port = 4041``)."""
        if isinstance(value, dict):
            return {
                k: str(v).lower()
                if isinstance(v, bool)
                else str(v)
                if isinstance(v, int | float | str)
                else v
                for k, v in value.items()
            }
        return value

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, value: Any) -> Any:
        return parse_retention(value)

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _pairs(self) -> ServeSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        if self.level_applications != "separate" and (self.level_master or self.level_conf):
            raise ValueError("level_master and level_conf go with level_applications = separate")
        if self.spark_ui and not _loopback(self.host):
            raise ValueError(
                "spark_ui: Spark's web UI has no authentication; enable it only with a "
                "loopback host"
            )
        return self

    def tuning(self) -> EngineTuning:
        """The engine's speed choices these settings make (engine/tuning.py)."""
        return EngineTuning(
            share_windows=self.share_windows,
            fuse=self.fuse_branches,
            share_aggregates=self.share_aggregates,
            share_sliding=self.share_sliding,
            driven_scan=self.driven_scan,
            driven_ingest=self.driven_ingest,
        )

    @property
    def catalog_target(self) -> str | Path:
        """What :class:`SecurityCatalog` opens: the URL, else the SQLite file under root."""
        return self.catalog_url or self.root / "catalog.db"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if settings_cls.model_config.get("toml_file"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)


def load(cli: dict[str, Any], config: Path | None = None) -> ServeSettings:
    """The settings from ``cli`` (options given on the command line, None = not given),
    the environment, ``config`` (or ``$STREAMSHIELD_CONFIG``) and the defaults.

    Raises :class:`ConfigError` with every problem named by key.
    """
    given = {k: v for k, v in cli.items() if v is not None and v != {} and v != ()}
    named = os.environ.get(f"{ENV_PREFIX}CONFIG")
    path = config or (Path(named) if named else None)
    model: type[ServeSettings] = ServeSettings
    if path is not None:
        _check_file(path)
        config_dict = SettingsConfigDict(**{**ServeSettings.model_config, "toml_file": path})
        model = type("ServeSettings", (ServeSettings,), {"model_config": config_dict})
    try:
        return model(**given)
    except ValidationError as err:
        raise ConfigError(describe(err, path)) from None


def _check_file(path: Path) -> None:
    """Readable TOML whose top level is a table (the source itself would skip a
    missing file silently)."""
    try:
        with path.open("rb") as handle:
            tomllib.load(handle)
    except OSError as err:
        raise ConfigError(f"config file {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path}: not valid TOML ({err})") from None


def describe(err: ValidationError, path: Path | None = None) -> str:
    """One line per problem: the key and what is wrong, never the rejected value."""
    where = f" (config file {path}, environment {ENV_PREFIX}*, or options)" if path else ""
    problems = []
    for problem in err.errors():
        key = ".".join(str(p) for p in problem.get("loc", ())) or "settings"
        message = str(problem.get("msg", "invalid")).removeprefix("Value error, ")
        if problem.get("type") == "extra_forbidden":
            message = "unknown setting"
        problems.append(f"{key}: {message}")
    return f"invalid configuration{where}: " + "; ".join(problems)


def parse_conf(pairs: tuple[str, ...] | list[str], option: str = "--conf") -> dict[str, str]:
    """``--conf key=value`` options as a dict; a pair without ``=`` is a ConfigError."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} {pair[:60]!r}: expected key=value")
        out[key.strip()] = value
    return out


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

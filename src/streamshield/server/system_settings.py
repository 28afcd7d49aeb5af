"""The system settings' schema (``GET/PUT /system/settings``): every known key, typed.

A stored setting is read by every later registration (quotas, operator limits), so a
bad one would not fail where it was made but everywhere after: ``quota=abc`` would
break every registration. So a change is validated as a whole before anything is
stored; an unknown key or a wrong type refuses the request and names the key.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from streamshield.policy.operator_limits import OperatorLimits

Count = Annotated[int, Field(ge=0, le=10**12)]


class SystemSettings(BaseModel):
    """The settings an administrator may change; each key is optional in a change."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=False)

    max_running_queries: Count | None = Field(None, alias="quota.max_running_queries")
    """Default per-user quota of running queries (a user's own quota overrides it)."""
    max_state_rows: Count | None = Field(None, alias="quota.max_state_rows")
    """Default per-user quota of state rows."""
    operator_limits: dict[str, Any] | None = None
    """Operator limits per role (:class:`~streamshield.policy.operator_limits.OperatorLimits`)."""
    sink_delta_roots: list[str] | None = Field(None, alias="sinks.delta_roots")
    """Where users' Delta sinks may write: absolute directories or URI prefixes
    (``s3://bucket/lake/``); none set, no Delta sink (server/sink_service.py)."""
    sink_kafka_brokers: list[str] | None = Field(None, alias="sinks.kafka_brokers")
    """The ``host:port`` brokers users' Kafka sinks may write to; none set, no Kafka sink."""

    @field_validator("operator_limits")
    @classmethod
    def _limits(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                OperatorLimits.from_dict(value)
            except (ValueError, TypeError) as err:
                raise ValueError(str(err)) from None
        return value


KNOWN = tuple(f.alias or name for name, f in SystemSettings.model_fields.items())


class SettingsRejected(ValueError):
    """A change with unknown keys or bad values; ``problems`` are (key, problem) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{key}: {problem}" for key, problem in problems))


def validated(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` if every key is known and every value has its type (None is no value);
    else :class:`SettingsRejected` naming each bad key, never echoing a value."""
    problems = [(key, "may not be null") for key, value in values.items() if value is None]
    try:
        SystemSettings.model_validate(values)
    except ValidationError as err:
        for error in err.errors():
            key = str(error["loc"][0]) if error.get("loc") else "values"
            if error.get("type") == "extra_forbidden":
                problems.append((key, f"unknown setting (known: {', '.join(KNOWN)})"))
            else:
                problems.append((key, _message(error)))
    if problems:
        raise SettingsRejected(problems)
    return dict(values)


def _message(error: Any) -> str:
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")

"""What every source binding declares: a stream, the channels feeding it, the format.

A binding maps what a broker names (a Kafka partition, an MQTT device) to a
:class:`ChannelSource`: the user whose WRITE (and, for sps, INJECT SP) on the stream
each landing needs, and the provider whose channel the messages form. Two sources of
one binding never share a provider: a channel's seqs must come from one ordered place.

A binding holds credentials (the broker's, a schema registry's): :meth:`SourceBinding.public`
is what the API shows (no password), :meth:`SourceBinding.stored` what the server keeps
(its file is 0600).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from streamshield.catalog.streams import check_name

PROVIDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}\Z")
"""A provider name the landing zone accepts (it becomes part of a file name)."""


class ChannelSource(BaseModel):
    """Who the messages of one channel act as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str = Field(description="The user whose WRITE / INJECT SP the messages need")
    provider: str | None = Field(
        default=None,
        description="The channel's provider: the user or '<user>.<anything>' (default: the user)",
    )

    @model_validator(mode="after")
    def _provider_of_user(self) -> ChannelSource:
        provider = self.provider or self.user
        if not PROVIDER.match(provider):
            raise ValueError(f"provider {provider!r} is not a valid provider name")
        if provider != self.user and not provider.startswith(self.user + "."):
            raise ValueError(
                f"provider {provider!r} is neither the user {self.user!r} nor "
                f"'{self.user}.<name>': a user writes only her own channels"
            )
        return self

    @property
    def channel_provider(self) -> str:
        return self.provider or self.user


class SourceBinding(BaseModel):
    """The fields and checks a Kafka and an MQTT binding share."""

    model_config = ConfigDict(extra="forbid")

    KIND: ClassVar[str]
    """``kafka`` or ``mqtt``: where the binding is kept and routed (``/connectors/<kind>``)."""
    CHANNEL: ClassVar[str]
    """What the broker calls a source of one channel: ``partition``, ``device``."""
    SOURCE: ClassVar[str]
    """The field naming what the binding reads: ``topic``, ``topic_filter``."""
    SECRETS: ClassVar[tuple[tuple[str, ...], ...]]
    """Where each password sits in the binding's JSON form (a path of field names; a
    part left out, such as an optional registry, holds none)."""

    name: str = Field(description="The binding's name (an identifier)")
    stream: str = Field(description="The input stream the messages land in")
    format: Literal["element", "values"] = Field(
        default="element",
        description="'element': each message is a wire-format element without seq (a tuple "
        "or an sp); 'values': each message is a JSON object of the tuple's attribute values",
    )
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Renames a message's value fields to the stream's attributes ('values')",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "a binding's name")

    @field_validator("stream")
    @classmethod
    def _stream(cls, value: str) -> str:
        return check_name(value, "stream")

    def sources(self) -> dict[Any, ChannelSource]:
        """Broker name (partition, device) -> who its messages act as."""
        raise NotImplementedError

    def channels(self) -> set[str]:
        return {source.channel_provider for source in self.sources().values()}

    def check_sources(self) -> None:
        """ValueError unless every source has its own channel and renames are names."""
        providers = [source.channel_provider for source in self.sources().values()]
        what = self.CHANNEL
        if len(set(providers)) != len(providers):
            raise ValueError(f"two {what}s never share a provider: each {what} is a channel")
        for source, target in self.fields.items():
            check_name(target, f"the attribute field {source!r} renames to")

    def audited(self) -> dict[str, Any]:
        """What the audit trail keeps of a bind: never the credentials."""
        return {
            "connector": self.KIND,
            "binding": self.name,
            self.SOURCE: getattr(self, self.SOURCE),
            f"{self.CHANNEL}s": {str(n): s.channel_provider for n, s in self.sources().items()},
        }

    def _secrets(self) -> list[tuple[tuple[str, ...], SecretStr]]:
        """Each password the binding holds, with its path."""
        found = []
        for path in self.SECRETS:
            holder: Any = self
            for step in path:
                holder = getattr(holder, step, None)
            if isinstance(holder, SecretStr):
                found.append((path, holder))
        return found

    def public(self) -> dict[str, Any]:
        """The binding as the API shows it: the password never leaves the server."""
        shown = self.model_dump(mode="json")
        for path in self.SECRETS:
            placed = _place(shown, path)
            if placed is not None:
                placed[0].pop(placed[1], None)
        return shown

    def stored(self) -> str:
        """The binding as the server keeps it, password included."""
        data = self.model_dump(mode="json")
        for path, secret in self._secrets():
            placed = _place(data, path)
            assert placed is not None  # the model holds it, so its dump does
            placed[0][placed[1]] = secret.get_secret_value()
        return json.dumps(data, indent=2)


def _place(data: dict[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], str] | None:
    """The dict holding ``path``'s last field in a binding's JSON form and that field, or
    None where a part on the way is absent."""
    *where, key = path
    holder: Any = data
    for step in where:
        holder = holder.get(step) if isinstance(holder, dict) else None
    return (holder, key) if isinstance(holder, dict) else None

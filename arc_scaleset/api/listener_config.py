"""The listener's ``config.json``: one model, written by the AutoscalingListener controller and read by the
listener (docs/listener.md).

The format is ARC's: flat snake_case keys in the order ARC's controller writes them, the GitHub credentials
inlined at the top level, so ARC's listener reads what this controller writes and this listener reads what
ARC's controller writes. Unknown keys are ignored. With a vault (``vault_type``), the credentials are not in the
file: ``vault_lookup_key`` names the vault secret and ``azure_key_vault`` how to reach the vault, and the listener
reads them from there when it starts (:meth:`ListenerConfig.with_credentials`).

**Decoding** follows Go's ``encoding/json``, as ARC's listener does: a missing key or ``null`` is the key's
zero value (the field's default here: ``max_runners`` is unbounded, an empty ``log_level``/``log_format`` is
``debug``/``text``), a value of another JSON type is refused rather than converted. Two leniencies are for
files ARC wrote: ``github_app_id`` as a number (before client IDs were accepted) and
``github_app_installation_id`` as a numeric string; an integral float reads as an integer.

**Validation** never stops at the first problem: :class:`ListenerConfigError` lists every problem, one
sentence each, naming the key, never quoting a credential. A key whose value cannot be decoded is reported
once, as such: the rules that read it are not evaluated, they would only repeat it. Every way of making a
:class:`ListenerConfig` (the controller's constructor call, the listener's :meth:`ListenerConfig.from_json`,
``model_validate``) applies the same rules, so the controller refuses exactly what the listener would.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Final

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

# The light modules only, never a kind's or api.common: the listener imports this module, and the kinds'
# models would cost it about 1 MB of memory (issue 20).
from arc_scaleset.api.constants import AZURE_KEY_VAULT, MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.credentials import APP_KEYS, TOKEN_KEY, AppConfig
from arc_scaleset.api.metrics_config import MetricsConfig

__all__ = [
    "CONFIG_PATH_ENV",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "PROBE_ADDR_ENV",
    "AzureKeyVaultListenerConfig",
    "ListenerConfig",
    "ListenerConfigError",
]

CONFIG_PATH_ENV: Final = "LISTENER_CONFIG_PATH"
"""The listener container's environment variable naming the config file."""
PROBE_ADDR_ENV: Final = "LISTENER_PROBE_ADDR"
"""The listener container's environment variable naming an address (``host:port``) for ``/healthz`` and
``/readyz`` besides ``metrics_addr``: set by the controller when the metrics server cannot carry the liveness
probe (metrics off, or bound to one interface)."""

LOG_LEVELS: Final = ("debug", "info", "warn", "error")
LOG_FORMATS: Final = ("text", "json")


class ListenerConfigError(Exception):
    """The configuration cannot be used; ``problems`` holds one sentence per problem, ``source`` where it
    came from (a path, or empty).

    Deliberately not a ``ValueError``: raised from the model's validator it reaches the caller untouched,
    where pydantic would wrap a ``ValueError`` into a ``ValidationError`` (whose text quotes the input).
    """

    def __init__(self, problems: Sequence[str], *, source: str = "") -> None:
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"invalid listener configuration{where}:\n{lines}")


# --- decoding, as Go's encoding/json does it ----------------------------------------------------------------


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"


def _refused(expected: str, value: object) -> PydanticCustomError:
    # The sentence names the JSON type of what was found, never the value: it may be a credential.
    return PydanticCustomError("config_type", "must be {expected}", {"expected": expected, "found": _json_type(value)})


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise _refused("a string", value)
    return value


def _integer(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _refused("an integer", value)


def _app_id(value: object) -> str:
    # ARC wrote the App ID as a number before client IDs were accepted, and as a string since.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value else ""
    if isinstance(value, str):
        return value.strip()
    raise _refused("a string (the App ID or client ID)", value)


def _installation_id(value: object) -> int:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0
        if text.isdigit():
            return int(text)
    return _integer(value)


def _metrics(value: object) -> object:
    """ARC's ``MetricsConfig`` as Go decodes it: a null entry is an empty one, null labels are no labels."""
    if isinstance(value, MetricsConfig):
        return value
    if not isinstance(value, Mapping):
        raise _refused("an object with counters, gauges and histograms", value)
    document = dict(value)
    for kind in ("counters", "gauges", "histograms"):
        entries = document.get(kind)
        if not isinstance(entries, Mapping):
            continue  # null: no such metrics; anything else is left for the model to refuse
        normalised: dict[Any, Any] = {}
        for name, entry in entries.items():
            entry = {} if entry is None else entry
            if isinstance(entry, Mapping):
                entry = {key: item for key, item in entry.items() if item is not None}
                entry.setdefault("labels", [])
            normalised[name] = entry
        document[kind] = normalised
    return document


GoString = Annotated[str, BeforeValidator(_string)]
GoInt = Annotated[int, BeforeValidator(_integer)]

_EXPECTED_BY_ERROR_TYPE: Final = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "string_type": "a string",
    "float_type": "a number",
    "int_type": "an integer",
    "bool_type": "a boolean",
}


def _sentence(error: ErrorDetails) -> str:
    """One problem, by key path (``metrics.histograms.h.buckets.0``), saying what was expected and what found."""
    path = ".".join(str(part) for part in error["loc"])
    context = error.get("ctx") or {}
    expected = context.get("expected") if error["type"] == "config_type" else _EXPECTED_BY_ERROR_TYPE.get(error["type"])
    if expected is None:
        return f"{path} is invalid: {error['msg']}"
    found = context.get("found") or _json_type(error["input"])
    return f"{path} must be {expected}, got {found}"


def _decodable_path(location: tuple[int | str, ...]) -> tuple[str, ...]:
    """The object keys leading to an undecodable value (a bad list element condemns its whole list)."""
    path: list[str] = []
    for part in location:
        if not isinstance(part, str):
            break
        path.append(part)
    return tuple(path)


def _without(document: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``document`` without the value at ``path`` (``document`` is left alone)."""
    copy = dict(document)
    if not path:
        return copy
    head, rest = path[0], path[1:]
    inner = copy.get(head)
    if rest and isinstance(inner, Mapping):
        copy[head] = _without(inner, rest)
    else:
        copy.pop(head, None)
    return copy


def _overlap(key: str, path: str) -> bool:
    """Whether the dotted paths ``key`` and ``path`` name the same value, or one holds the other."""
    return key == path or key.startswith(path + ".") or path.startswith(key + ".")


# --- the model ----------------------------------------------------------------------------------------------


class AzureKeyVaultListenerConfig(BaseModel):
    """``azure_key_vault`` in ``config.json``: ARC's four fields (its ``proxy`` key is not written by ARC's
    controller and is ignored here: the vault is reached as the listener's environment says)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, hide_input_in_errors=True)

    tenant_id: GoString = ""
    client_id: GoString = ""
    url: GoString = ""
    certificate_path: GoString = ""


class ListenerConfig(BaseModel):
    """A valid listener configuration; the fields are the ``config.json`` keys, in ARC's order.

    The credentials are ``github_token`` or the three ``github_app_*`` fields, under the one credential rule
    (:mod:`arc_scaleset.api.credentials`, ARC's). Secret values are kept out of ``repr``; :meth:`app_config`
    hands them to the GitHub client and :meth:`secrets` to log redaction.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, hide_input_in_errors=True)

    configure_url: GoString = ""
    vault_type: GoString = ""
    vault_lookup_key: GoString = ""
    # ARC's key is omitted when empty (Go's omitempty); None is "not written".
    azure_key_vault: AzureKeyVaultListenerConfig | None = None
    github_app_id: Annotated[str, BeforeValidator(_app_id)] = ""
    github_app_installation_id: Annotated[int, BeforeValidator(_installation_id)] = 0
    github_app_private_key: GoString = Field(default="", repr=False)
    github_token: GoString = Field(default="", repr=False)
    ephemeral_runner_set_namespace: GoString = ""
    ephemeral_runner_set_name: GoString = ""
    max_runners: GoInt = MAX_RUNNERS_UNBOUNDED
    min_runners: GoInt = 0
    runner_scale_set_id: GoInt = 0
    runner_scale_set_name: GoString = ""
    server_root_ca: GoString = Field(default="", repr=False)
    log_level: GoString = "debug"
    log_format: GoString = "text"
    metrics_addr: GoString = ""
    metrics_endpoint: GoString = ""
    metrics: Annotated[MetricsConfig | None, BeforeValidator(_metrics)] = None

    # -- reading ---------------------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, raw: bytes | str, *, source: str = "") -> ListenerConfig:
        """Decode and validate the text of a ``config.json``; :class:`ListenerConfigError` lists every problem."""
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            # The decoder's message quotes at most a position, never the content (which holds secrets).
            raise ListenerConfigError([f"the file is not valid JSON: {exc.args[0]}"], source=source) from None
        try:
            return cls.model_validate(document)
        except ListenerConfigError as exc:
            raise ListenerConfigError(exc.problems, source=source) from None

    @field_validator("log_level", "log_format")
    @classmethod
    def _empty_is_the_default(cls, value: str, info: ValidationInfo) -> str:
        # ARC's listener falls back to its defaults for an empty level or format.
        return value or str(cls.model_fields[info.field_name or ""].default)

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem_at_once(cls, data: Any, handler: ModelWrapValidatorHandler[ListenerConfig]) -> ListenerConfig:
        if isinstance(data, ListenerConfig):
            return handler(data)
        if not isinstance(data, Mapping):
            raise ListenerConfigError(["the configuration must be a JSON object"])
        # Go decodes null as the zero value, which is what a missing key gets here.
        document: dict[str, Any] = {key: value for key, value in data.items() if value is not None}
        problems: list[str] = []
        undecodable: list[str] = []
        while True:
            try:
                config = handler(document)
                break
            except ValidationError as exc:
                errors = exc.errors(include_url=False)
            # Take out what could not be decoded and decode the rest again, so that the rules still judge
            # every value that can be judged.
            paths = [_decodable_path(error["loc"]) for error in errors]
            problems.extend(_sentence(error) for error in errors)
            undecodable.extend(".".join(path) for path in paths)
            salvaged = functools.reduce(_without, paths, document)
            if salvaged == document:  # nothing could be taken out: there is nothing more to judge
                raise ListenerConfigError(problems)
            document = salvaged
        problems.extend(
            problem
            for keys, problem in config._broken_rules()
            if not any(_overlap(key, path) for key in keys for path in undecodable)
        )
        if problems:
            raise ListenerConfigError(problems)
        return config

    def _broken_rules(self) -> Iterator[tuple[tuple[str, ...], str]]:
        """Each broken rule: the keys it reads and what is wrong (ARC's rules, plus the ranges Go's types hold)."""
        if not self.configure_url:
            yield ("configure_url",), "configure_url is required: the GitHub enterprise, organization or repository URL"
        if not self.ephemeral_runner_set_namespace:
            yield ("ephemeral_runner_set_namespace",), "ephemeral_runner_set_namespace is required"
        if not self.ephemeral_runner_set_name:
            yield ("ephemeral_runner_set_name",), "ephemeral_runner_set_name is required"
        if self.runner_scale_set_id == 0:
            yield ("runner_scale_set_id",), "runner_scale_set_id is required and must not be 0"
        if self.min_runners < 0:
            yield ("min_runners",), f"min_runners must be 0 or more, got {self.min_runners}"
        if not 0 <= self.max_runners <= MAX_RUNNERS_UNBOUNDED:
            yield (
                ("max_runners",),
                f"max_runners must be between 0 and {MAX_RUNNERS_UNBOUNDED}, got {self.max_runners}",
            )
        if self.max_runners < self.min_runners:
            yield (
                ("max_runners", "min_runners"),
                f"max_runners ({self.max_runners}) must be greater than or equal to min_runners ({self.min_runners})",
            )
        if self.log_level not in LOG_LEVELS:
            yield ("log_level",), f"log_level must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"
        if self.log_format not in LOG_FORMATS:
            yield ("log_format",), f"log_format must be one of {', '.join(LOG_FORMATS)}, got {self.log_format!r}"
        yield from self._broken_credential_rules()
        for name, histogram in ((self.metrics and self.metrics.histograms) or {}).items():
            buckets = histogram.buckets or []
            if buckets != sorted(set(buckets)):
                where = f"metrics.histograms.{name}.buckets"
                yield (where,), f"{where} must be strictly increasing"

    def _broken_credential_rules(self) -> Iterator[tuple[tuple[str, ...], str]]:
        if self.vault_type:
            if self.vault_type != AZURE_KEY_VAULT:
                yield ("vault_type",), f"vault_type must be empty or {AZURE_KEY_VAULT!r}, got {self.vault_type!r}"
                return
            if not self.vault_lookup_key:
                yield ("vault_type", "vault_lookup_key"), "vault_lookup_key is required when vault_type is set"
            vault = self.azure_key_vault
            if vault is None:
                yield (
                    ("vault_type", "azure_key_vault"),
                    "azure_key_vault is required when vault_type is 'azure_key_vault' (tenant_id, client_id, url,"
                    " certificate_path)",
                )
                return
            for key in ("tenant_id", "client_id", "url", "certificate_path"):
                if not getattr(vault, key):
                    yield (f"azure_key_vault.{key}",), f"azure_key_vault.{key} is required"
            # The credentials come from the vault when the listener starts: nothing to judge here.
            return
        # The one credential rule (api/credentials.py), which the controller applies to the Secret too.
        problem = self._app_config().problem()
        if problem is not None:
            yield ("vault_type", TOKEN_KEY, *APP_KEYS), problem

    # -- writing ---------------------------------------------------------------------------------------------

    @field_serializer("metrics")
    def _metrics_as_written(self, metrics: MetricsConfig | None) -> dict[str, Any] | None:
        # Only what the AutoscalingListener set, as ARC's Go structs omit their empty fields.
        return metrics.to_json() if metrics is not None else None

    def to_document(self) -> dict[str, Any]:
        """The JSON object, every key present (but ``azure_key_vault`` without a vault), in ARC's order."""
        document = self.model_dump(mode="json")
        if document["azure_key_vault"] is None:
            del document["azure_key_vault"]
        return document

    def to_json(self) -> bytes:
        """The ``config.json`` bytes."""
        return orjson.dumps(self.to_document())

    # -- using -----------------------------------------------------------------------------------------------

    def _app_config(self) -> AppConfig:
        return AppConfig(
            github_token=self.github_token,
            github_app_id=self.github_app_id,
            github_app_installation_id=self.github_app_installation_id,
            github_app_private_key=self.github_app_private_key,
        )

    def with_credentials(self, credentials: AppConfig) -> ListenerConfig:
        """This config with ``credentials`` (read from the vault) in place of the file's ones."""
        return self.model_copy(
            update={
                "github_token": credentials.github_token,
                "github_app_id": credentials.github_app_id,
                "github_app_installation_id": credentials.github_app_installation_id,
                "github_app_private_key": credentials.github_app_private_key,
            }
        )

    def app_config(self) -> AppConfig:
        """The credentials the listener uses, as the credential rule chose them (a valid config has some): the
        token alone when there is one (with part of an App beside it, as ARC allows), else the App."""
        return self._app_config().validated()

    @property
    def uses_github_app(self) -> bool:
        """True when the credentials are a GitHub App's."""
        return not self.app_config().has_token

    def secrets(self) -> list[str]:
        """Every secret value in this config, for log redaction."""
        return [value for value in (self.github_token, self.github_app_private_key) if value]

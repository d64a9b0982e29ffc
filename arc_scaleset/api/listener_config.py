"""The listener's ``config.json``: one model, written by the AutoscalingListener controller and read by the
listener (docs/listener.md).

The format is ARC's: flat snake_case keys in the order ARC's controller writes them, the GitHub credentials
inlined at the top level, so ARC's listener reads what this controller writes and this listener reads what
ARC's controller writes. Unknown keys are ignored. A file ARC's controller wrote for a vault (``vault_type``) has
no credentials: ``vault_lookup_key`` names the vault secret and ``azure_key_vault`` how to reach the vault, and the
listener reads them from there when it starts (:meth:`ListenerConfig.with_credentials`). This project's controller
never writes vault fields: it reads the vault itself and writes the credentials (docs/github.md). One key is this
project's own, written only when it has a value: ``min_runners_schedule``, the scale set's ``minRunnersSchedule``
(docs/listener.md, "The scaling rule"; ARC's listener ignores it).

**Decoding** follows Go's ``encoding/json``, as ARC's listener does (:mod:`arc_scaleset.api.go_json`): a missing
key or ``null`` is the key's zero value (the field's default here: ``max_runners`` is unbounded, an empty
``log_level``/``log_format`` is ``debug``/``text``), a value of another JSON type is refused rather than
converted. Two leniencies are for files ARC wrote: ``github_app_id`` as a number (before client IDs were
accepted) and ``github_app_installation_id`` as a numeric string; an integral float reads as an integer.

**Validation** never stops at the first problem: :class:`ListenerConfigError` lists every problem, one
sentence each, naming the key, never quoting a credential. A key whose value cannot be decoded is reported
once, as such: the rules that read it are not evaluated, they would only repeat it. Every way of making a
:class:`ListenerConfig` (the controller's constructor call, the listener's :meth:`ListenerConfig.from_json`,
:meth:`ListenerConfig.from_document`, ``dataclasses.replace``) decodes and judges in ``__post_init__``, so the
controller refuses exactly what the listener would.

Plain frozen dataclasses over the standard library: the listener imports this module, and pydantic would cost
it about 10 MB (issue 20).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

# The light modules only, never a kind's or api.common: the listener imports this module, and the kinds'
# models would cost it about 1 MB of memory (issue 20).
from arc_scaleset.api import go_json
from arc_scaleset.api.constants import AZURE_KEY_VAULT, MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.credentials import APP_KEYS, TOKEN_KEY, AppConfig
from arc_scaleset.api.go_json import Refused
from arc_scaleset.api.listener_metrics import ListenerMetricsConfig
from arc_scaleset.api.windows import Window, WindowError

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
    came from (a path, or empty)."""

    def __init__(self, problems: Sequence[str], *, source: str = "") -> None:
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"invalid listener configuration{where}:\n{lines}")


# --- the leniencies for files ARC wrote -----------------------------------------------------------------------


def _app_id(value: object) -> str:
    # ARC wrote the App ID as a number before client IDs were accepted, and as a string since.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value else ""
    if isinstance(value, str):
        return value.strip()
    raise Refused.wrong_type("a string (the App ID or client ID)", value)


def _installation_id(value: object) -> int:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0
        if text.isdigit():
            return int(text)
    return go_json.integer(value)


def _log_level(value: object) -> str:
    # ARC's listener falls back to its defaults for an empty level or format.
    return go_json.string(value) or "debug"


def _log_format(value: object) -> str:
    return go_json.string(value) or "text"


_WINDOW_KEYS: Final[Mapping[str, go_json.Decoder[Any]]] = {
    "days": go_json.string,
    "start": go_json.string,
    "end": go_json.string,
    "time_zone": go_json.string,
    "runners": go_json.integer,
}


def _window(value: object) -> Window:
    """One ``min_runners_schedule`` entry (:mod:`arc_scaleset.api.windows`); a missing ``days`` or ``time_zone`` is
    ``*`` or ``UTC``, as in the AutoscalingRunnerSet, and a missing ``start`` or ``end`` is refused."""
    if isinstance(value, Window):
        return value
    if not isinstance(value, Mapping):
        raise Refused.wrong_type("an object", value)
    fields, refusals = go_json.decode_fields(value, _WINDOW_KEYS)
    if refusals:
        raise Refused(refusals)
    try:
        return Window(**fields)
    except WindowError as exc:
        raise Refused([go_json.Refusal((exc.field,), exc.expected, exc.found)]) from None


def _overlap(key: str, path: str) -> bool:
    """Whether the dotted paths ``key`` and ``path`` name the same value, or one holds the other."""
    return key == path or key.startswith(path + ".") or path.startswith(key + ".")


# --- the model ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AzureKeyVaultListenerConfig:
    """``azure_key_vault`` in ``config.json``: ARC's four fields (its ``proxy`` key is not written by ARC's
    controller and is ignored here: the vault is reached as the listener's environment says)."""

    tenant_id: str = ""
    client_id: str = ""
    url: str = ""
    certificate_path: str = ""

    def to_document(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_VAULT: Final = go_json.struct(
    AzureKeyVaultListenerConfig,
    {key: go_json.string for key in ("tenant_id", "client_id", "url", "certificate_path")},
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerConfig:
    """A valid listener configuration; the fields are the ``config.json`` keys, in ARC's order.

    The credentials are ``github_token`` or the three ``github_app_*`` fields, under the one credential rule
    (:mod:`arc_scaleset.api.credentials`, ARC's). Secret values are kept out of ``repr``; :meth:`app_config`
    hands them to the GitHub client and :meth:`secrets` to log redaction. Constructing one decodes every field
    as :meth:`from_document` does and raises :class:`ListenerConfigError` with every problem.
    """

    configure_url: str = ""
    vault_type: str = ""
    vault_lookup_key: str = ""
    # ARC's key is omitted when empty (Go's omitempty); None is "not written".
    azure_key_vault: AzureKeyVaultListenerConfig | None = None
    github_app_id: str = ""
    github_app_installation_id: int = 0
    github_app_private_key: str = field(default="", repr=False)
    github_token: str = field(default="", repr=False)
    ephemeral_runner_set_namespace: str = ""
    ephemeral_runner_set_name: str = ""
    max_runners: int = MAX_RUNNERS_UNBOUNDED
    min_runners: int = 0
    runner_scale_set_id: int = 0
    runner_scale_set_name: str = ""
    server_root_ca: str = field(default="", repr=False)
    log_level: str = "debug"
    log_format: str = "text"
    metrics_addr: str = ""
    metrics_endpoint: str = ""
    metrics: ListenerMetricsConfig | None = None
    # This project's own key (ARC's listener ignores it): the AutoscalingRunnerSet's minRunnersSchedule. Written
    # only when there are windows, so a scale set without one gets the file ARC's controller writes.
    min_runners_schedule: tuple[Window, ...] = ()

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
            return cls.from_document(document)
        except ListenerConfigError as exc:
            raise ListenerConfigError(exc.problems, source=source) from None

    @classmethod
    def from_document(cls, document: object) -> ListenerConfig:
        """Decode and validate a decoded ``config.json`` (a JSON object); :class:`ListenerConfigError` lists
        every problem. Unknown keys are ignored."""
        if not isinstance(document, Mapping):
            raise ListenerConfigError(["the configuration must be a JSON object"])
        # The values as they are: __post_init__ decodes them, as it does the controller's keywords.
        return cls(**{key: document[key] for key in _DECODERS if key in document})

    def __post_init__(self) -> None:
        decoded, refusals = go_json.decode_fields({key: getattr(self, key) for key in _DECODERS}, _DECODERS)
        for key, default in _DEFAULTS.items():
            # A frozen dataclass sets its own fields this way; null, and what did not decode, is the default.
            object.__setattr__(self, key, decoded.get(key, default))
        undecodable = [refusal.dotted for refusal in refusals]
        problems = [refusal.sentence() for refusal in refusals]
        problems.extend(
            problem
            for keys, problem in self._broken_rules()
            if not any(_overlap(key, path) for key in keys for path in undecodable)
        )
        if problems:
            raise ListenerConfigError(problems)

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
            buckets = histogram.buckets or ()
            if list(buckets) != sorted(set(buckets)):
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

    def to_document(self) -> dict[str, Any]:
        """The JSON object, every key present (but ``azure_key_vault`` without a vault), in ARC's order; of the
        metrics, only what the AutoscalingListener set, as ARC's Go structs omit their empty fields."""
        document: dict[str, Any] = {key: getattr(self, key) for key in _DECODERS}
        if self.azure_key_vault is None:
            del document["azure_key_vault"]
        else:
            document["azure_key_vault"] = self.azure_key_vault.to_document()
        if self.metrics is not None:
            document["metrics"] = self.metrics.to_document()
        if self.min_runners_schedule:
            document["min_runners_schedule"] = [window.to_document() for window in self.min_runners_schedule]
        else:
            del document["min_runners_schedule"]
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
        return dataclasses.replace(
            self,
            github_token=credentials.github_token,
            github_app_id=credentials.github_app_id,
            github_app_installation_id=credentials.github_app_installation_id,
            github_app_private_key=credentials.github_app_private_key,
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


# How each key is decoded, in ARC's order (the order the file is written in and problems are reported in).
_DECODERS: Final[Mapping[str, go_json.Decoder[Any]]] = {
    "configure_url": go_json.string,
    "vault_type": go_json.string,
    "vault_lookup_key": go_json.string,
    "azure_key_vault": _VAULT,
    "github_app_id": _app_id,
    "github_app_installation_id": _installation_id,
    "github_app_private_key": go_json.string,
    "github_token": go_json.string,
    "ephemeral_runner_set_namespace": go_json.string,
    "ephemeral_runner_set_name": go_json.string,
    "max_runners": go_json.integer,
    "min_runners": go_json.integer,
    "runner_scale_set_id": go_json.integer,
    "runner_scale_set_name": go_json.string,
    "server_root_ca": go_json.string,
    "log_level": _log_level,
    "log_format": _log_format,
    "metrics_addr": go_json.string,
    "metrics_endpoint": go_json.string,
    "metrics": ListenerMetricsConfig.from_document,
    "min_runners_schedule": go_json.array_of(_window),
}
_DEFAULTS: Final = {spec.name: spec.default for spec in dataclasses.fields(ListenerConfig)}
if list(_DEFAULTS) != list(_DECODERS):  # a field without a decoder would silently keep its default
    raise TypeError("every ListenerConfig field needs a decoder in _DECODERS, in the fields' order")

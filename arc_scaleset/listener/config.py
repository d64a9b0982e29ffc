"""The listener's configuration: ARC's ``config.json``, loaded from the path in ``LISTENER_CONFIG_PATH``.

The format is exactly the one ARC's AutoscalingListener controller writes into the ``<listener>-config``
Secret (spec 3.1): flat snake_case keys, the GitHub credentials inlined at the top level. A config file
written by ARC's own controller loads here unchanged.

Loading never stops at the first problem: every key is checked and :class:`ConfigError` lists each
problem on its own line, so one restart is enough to see everything that needs fixing. Credentials are
kept out of every ``repr`` and error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

CONFIG_PATH_ENV = "LISTENER_CONFIG_PATH"
MAX_INT32 = 2**31 - 1

LOG_LEVELS = ("debug", "info", "warn", "error")
LOG_FORMATS = ("text", "json")
AZURE_KEY_VAULT = "azure_key_vault"


class ConfigError(Exception):
    """The configuration cannot be used; ``problems`` holds one human-readable sentence per problem."""

    def __init__(self, problems: list[str], *, source: str = "") -> None:
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"invalid listener configuration{where}:\n{lines}")


@dataclass(frozen=True)
class CounterSpec:
    """A counter to register, with exactly these labels."""

    labels: tuple[str, ...]


@dataclass(frozen=True)
class GaugeSpec:
    """A gauge to register, with exactly these labels."""

    labels: tuple[str, ...]


@dataclass(frozen=True)
class HistogramSpec:
    """A histogram to register, with exactly these labels; empty ``buckets`` means the default buckets."""

    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


@dataclass(frozen=True)
class MetricsConfig:
    """ARC's ``MetricsConfig`` (AutoscalingListener ``spec.metrics``): which listener metrics exist."""

    counters: Mapping[str, CounterSpec] = field(default_factory=dict)
    gauges: Mapping[str, GaugeSpec] = field(default_factory=dict)
    histograms: Mapping[str, HistogramSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class AzureKeyVaultConfig:
    """Where ARC would fetch the credentials from when ``vault_type`` is ``azure_key_vault``."""

    tenant_id: str = ""
    client_id: str = ""
    url: str = ""
    certificate_path: str = ""


@dataclass(frozen=True)
class ListenerConfig:
    """A validated listener configuration.

    Exactly one credential kind is set: ``github_token`` (a PAT), or the three ``github_app_*`` fields.
    The secret fields are excluded from ``repr``; :meth:`credential_data` hands them to the GitHub client
    and :meth:`secrets` to log redaction.
    """

    configure_url: str
    ephemeral_runner_set_namespace: str
    ephemeral_runner_set_name: str
    runner_scale_set_id: int
    runner_scale_set_name: str = ""
    min_runners: int = 0
    max_runners: int = MAX_INT32
    github_token: str = field(default="", repr=False)
    github_app_id: str = ""
    github_app_installation_id: int = 0
    github_app_private_key: str = field(default="", repr=False)
    server_root_ca: str = field(default="", repr=False)
    log_level: str = "debug"
    log_format: str = "text"
    metrics_addr: str = ""
    metrics_endpoint: str = ""
    metrics: MetricsConfig | None = None
    vault_type: str = ""
    vault_lookup_key: str = ""

    @property
    def uses_github_app(self) -> bool:
        """True when the credentials are a GitHub App's (a token, when present, wins, as in ARC)."""
        return not self.github_token

    def credential_data(self) -> dict[str, str]:
        """The credentials in the key layout of a GitHub config Secret (spec 4.2), values as strings."""
        if self.github_token:
            return {"github_token": self.github_token}
        return {
            "github_app_id": self.github_app_id,
            "github_app_installation_id": str(self.github_app_installation_id),
            "github_app_private_key": self.github_app_private_key,
        }

    def secrets(self) -> list[str]:
        """Every secret value in this config, for log redaction."""
        return [value for value in (self.github_token, self.github_app_private_key) if value]


def config_path_from_environment(environ: Mapping[str, str] | None = None) -> Path:
    """The config path named by ``LISTENER_CONFIG_PATH``; :class:`ConfigError` when it is unset or empty."""
    env = os.environ if environ is None else environ
    value = env.get(CONFIG_PATH_ENV, "")
    if not value:
        raise ConfigError([f"environment variable {CONFIG_PATH_ENV} is not set: it must name the config.json file"])
    return Path(value)


def load_config(path: Path) -> ListenerConfig:
    """Read and validate ``path``; :class:`ConfigError` lists every problem found."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError([f"cannot read the config file: {exc.strerror or exc}"], source=str(path)) from None
    return parse_config(raw, source=str(path))


def parse_config(raw: bytes | str, *, source: str = "") -> ListenerConfig:
    """Parse and validate the JSON text of a ``config.json``."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # The decoder's message quotes at most a position, never the content (which holds secrets).
        raise ConfigError([f"the file is not valid JSON: {exc.args[0]}"], source=source) from None
    if not isinstance(document, dict):
        raise ConfigError(["the file must hold a JSON object"], source=source)
    return config_from_mapping(document, source=source)


def config_from_mapping(document: Mapping[str, Any], *, source: str = "") -> ListenerConfig:
    """Validate an already-decoded ``config.json`` object (spec 3.1 rules)."""
    reader = _Reader(document)
    configure_url = reader.string("configure_url")
    vault_type = reader.string("vault_type")
    vault_lookup_key = reader.string("vault_lookup_key")
    github_token = reader.string("github_token")
    github_app_id = reader.app_id("github_app_id")
    installation_id = reader.integer("github_app_installation_id", allow_numeric_string=True)
    private_key = reader.string("github_app_private_key")
    ers_namespace = reader.string("ephemeral_runner_set_namespace")
    ers_name = reader.string("ephemeral_runner_set_name")
    max_runners = reader.integer("max_runners", default=MAX_INT32)
    min_runners = reader.integer("min_runners")
    scale_set_id = reader.integer("runner_scale_set_id")
    scale_set_name = reader.string("runner_scale_set_name")
    server_root_ca = reader.string("server_root_ca")
    log_level = reader.string("log_level") or "debug"
    log_format = reader.string("log_format") or "text"
    metrics_addr = reader.string("metrics_addr")
    metrics_endpoint = reader.string("metrics_endpoint")
    metrics = reader.metrics("metrics")
    problems = reader.problems

    if not configure_url:
        problems.append("configure_url is required: the GitHub enterprise, organization or repository URL")
    if not ers_namespace:
        problems.append("ephemeral_runner_set_namespace is required")
    if not ers_name:
        problems.append("ephemeral_runner_set_name is required")
    if scale_set_id == 0 and "runner_scale_set_id" not in reader.bad_keys:
        problems.append("runner_scale_set_id is required and must not be 0")
    if min_runners < 0:
        problems.append(f"min_runners must be 0 or more, got {min_runners}")
    if max_runners < 0 or max_runners > MAX_INT32:
        problems.append(f"max_runners must be between 0 and {MAX_INT32}, got {max_runners}")
    if max_runners < min_runners:
        problems.append(f"max_runners ({max_runners}) must be greater than or equal to min_runners ({min_runners})")
    if log_level not in LOG_LEVELS:
        problems.append(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    if log_format not in LOG_FORMATS:
        problems.append(f"log_format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")

    if vault_type:
        if vault_type != AZURE_KEY_VAULT:
            problems.append(f"vault_type must be empty or {AZURE_KEY_VAULT!r}, got {vault_type!r}")
        else:
            if not vault_lookup_key:
                problems.append("vault_lookup_key is required when vault_type is set")
            # The vault is an Azure service reached with Azure credentials; this listener has no Azure
            # client and nothing here could reach one, so it says so rather than starting half-working.
            problems.append(
                "vault_type 'azure_key_vault' is not supported by this listener (it cannot reach Azure Key "
                "Vault): store the GitHub credentials in a Kubernetes Secret and name it in githubConfigSecret"
            )
    else:
        has_token = bool(github_token)
        app_fields = {
            "github_app_id": bool(github_app_id),
            "github_app_installation_id": installation_id > 0,
            "github_app_private_key": bool(private_key),
        }
        has_any_app = any(app_fields.values())
        if has_token and has_any_app:
            problems.append(
                "both PAT and GitHub App credentials provided: set either github_token or the three "
                "github_app_* fields, not both"
            )
        elif not has_token and not has_any_app:
            problems.append(
                "no credentials provided: set github_token, or github_app_id, github_app_installation_id "
                "and github_app_private_key"
            )
        elif not has_token:
            missing = [key for key, present in app_fields.items() if not present]
            if missing:
                problems.append(f"incomplete GitHub App credentials: {', '.join(missing)} missing or empty")

    if problems:
        raise ConfigError(problems, source=source)
    return ListenerConfig(
        configure_url=configure_url,
        ephemeral_runner_set_namespace=ers_namespace,
        ephemeral_runner_set_name=ers_name,
        runner_scale_set_id=scale_set_id,
        runner_scale_set_name=scale_set_name,
        min_runners=min_runners,
        max_runners=max_runners,
        github_token=github_token,
        github_app_id="" if github_token else github_app_id,
        github_app_installation_id=0 if github_token else installation_id,
        github_app_private_key="" if github_token else private_key,
        server_root_ca=server_root_ca,
        log_level=log_level,
        log_format=log_format,
        metrics_addr=metrics_addr,
        metrics_endpoint=metrics_endpoint,
        metrics=metrics,
        vault_type=vault_type,
        vault_lookup_key=vault_lookup_key,
    )


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


class _Reader:
    """Typed access to the decoded document that records a problem (never the value) per bad key.

    ``null`` reads as the zero value, as Go's decoder treats it.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._document = document
        self.problems: list[str] = []
        self.bad_keys: set[str] = set()

    def _bad(self, key: str, expected: str, value: object) -> None:
        self.bad_keys.add(key)
        self.problems.append(f"{key} must be {expected}, got {_type_name(value)}")

    def string(self, key: str) -> str:
        value = self._document.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self._bad(key, "a string", value)
            return ""
        return value

    def integer(self, key: str, *, default: int = 0, allow_numeric_string: bool = False) -> int:
        value = self._document.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            self._bad(key, "an integer", value)
            return default
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if allow_numeric_string and isinstance(value, str):
            text = value.strip()
            if not text:
                return default
            if text.isdigit():
                return int(text)
        self._bad(key, "an integer", value)
        return default

    def app_id(self, key: str) -> str:
        # ARC wrote the App ID as a number before client IDs were accepted, and as a string since.
        value = self._document.get(key)
        if value is None:
            return ""
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value) if value else ""
        if isinstance(value, str):
            return value.strip()
        self._bad(key, "a string (the App ID or client ID)", value)
        return ""

    def metrics(self, key: str) -> MetricsConfig | None:
        value = self._document.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self._bad(key, "an object with counters, gauges and histograms", value)
            return None
        return MetricsConfig(
            counters={name: CounterSpec(labels) for name, labels, _ in self._metric_kind(value, "counters")},
            gauges={name: GaugeSpec(labels) for name, labels, _ in self._metric_kind(value, "gauges")},
            histograms={
                name: HistogramSpec(labels, buckets)
                for name, labels, buckets in self._metric_kind(value, "histograms", with_buckets=True)
            },
        )

    def _metric_kind(
        self, metrics: Mapping[str, Any], kind: str, *, with_buckets: bool = False
    ) -> list[tuple[str, tuple[str, ...], tuple[float, ...]]]:
        entries = metrics.get(kind)
        where = f"metrics.{kind}"
        if entries is None:
            return []
        if not isinstance(entries, dict):
            self._bad(where, "an object mapping metric names to {labels}", entries)
            return []
        result: list[tuple[str, tuple[str, ...], tuple[float, ...]]] = []
        for name, spec in entries.items():
            entry = f"{where}.{name}"
            if spec is None:
                spec = {}
            if not isinstance(spec, dict):
                self._bad(entry, "an object", spec)
                continue
            labels = spec.get("labels") or []
            if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
                self._bad(f"{entry}.labels", "an array of label names", labels)
                continue
            buckets: list[float] = []
            if with_buckets:
                raw_buckets = spec.get("buckets") or []
                if not isinstance(raw_buckets, list) or not all(
                    isinstance(b, int | float) and not isinstance(b, bool) for b in raw_buckets
                ):
                    self._bad(f"{entry}.buckets", "an array of numbers", raw_buckets)
                    continue
                buckets = [float(b) for b in raw_buckets]
                if buckets != sorted(set(buckets)):
                    self.problems.append(f"{entry}.buckets must be strictly increasing")
                    continue
            result.append((str(name), tuple(labels), tuple(buckets)))
        return result

"""Flags read as Go's ``flag`` package reads them, so the args of an ARC controller Deployment work unchanged.

- :func:`add_go_flag`: ``--name`` (shown in help) plus ``-name`` (hidden): Go accepts one dash or two.
- :func:`parse_go_bool` / :class:`GoBoolAction`: ``--name``, ``--name=true|false`` and Go's other spellings
  (``1/0/t/f/TRUE/False``...).
- :func:`parse_go_duration`: ``1m30s``, ``500ms``, ``1h``; ``0`` alone.
- :data:`LEGACY_FLAGS`: flags of ARC's manager that do nothing here; :func:`add_legacy_flags` accepts them and
  :func:`legacy_flag_warnings` gives one line per flag given (never its value: some carry credentials).

Values that do not parse raise :class:`argparse.ArgumentTypeError`, which argparse reports (exit code 2).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any, Final

_GO_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_DURATION_UNITS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART: Final = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_bool(text: str) -> bool:
    """A boolean as Go's ``strconv.ParseBool`` reads it."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (use true or false)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration such as ``1m``, ``90s``, ``1h30m``, ``500ms`` (``0`` alone is allowed)."""
    value = text.strip()
    sign = -1.0 if value.startswith("-") else 1.0
    body = value.lstrip("+-")
    if body == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 30s, 1m, 1h30m)")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if not body:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 30s, 1m, 1h30m)")
    return sign * total


class GoBoolAction(argparse.Action):
    """``--name`` sets True; ``--name=false`` (or any Go boolean spelling) sets the value given."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("default", False)
        super().__init__(option_strings, dest, nargs="?", const=True, type=parse_go_bool, metavar="BOOL", **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        setattr(namespace, self.dest, values)


def add_go_flag(group: argparse._ActionsContainer, name: str, **kwargs: Any) -> None:
    """Add ``--name`` (shown in help) and ``-name`` (hidden; Go's flag package accepts one dash too).

    ``kwargs`` are :meth:`argparse.ArgumentParser.add_argument`'s; both spellings share one ``dest``.
    """
    group.add_argument(f"--{name}", **kwargs)
    alias = dict(kwargs)
    alias["help"] = argparse.SUPPRESS
    alias["default"] = argparse.SUPPRESS
    alias.setdefault("dest", name.replace("-", "_"))
    group.add_argument(f"-{name}", **alias)


# -- ARC's flags that do nothing here -----------------------------------------------------------------


@dataclass(frozen=True)
class LegacyFlag:
    """A flag of ARC's manager that this controller accepts and ignores (so ARC's args work unchanged)."""

    name: str
    kind: str  # "value", "bool" or "list"
    default: str
    reason: str = "a flag of ARC's legacy (summerwind) controllers"


LEGACY_FLAGS: Final = (
    LegacyFlag("runner-image", "value", "summerwind/actions-runner:latest"),
    LegacyFlag("docker-image", "value", "docker:dind"),
    LegacyFlag("docker-gid", "value", "1001"),
    LegacyFlag("runner-image-pull-secret", "list", "[]"),
    LegacyFlag("docker-registry-mirror", "value", '""'),
    LegacyFlag("github-token", "value", '""'),
    LegacyFlag("github-enterprise-url", "value", '""'),
    LegacyFlag("github-app-id", "value", "0"),
    LegacyFlag("github-app-installation-id", "value", "0"),
    LegacyFlag("github-app-private-key", "value", '""'),
    LegacyFlag("github-url", "value", '""'),
    LegacyFlag("github-upload-url", "value", '""'),
    LegacyFlag("github-basicauth-username", "value", '""'),
    LegacyFlag("github-basicauth-password", "value", '""'),
    LegacyFlag("runner-github-url", "value", '""'),
    LegacyFlag("runner-status-update-hook", "bool", "false"),
    LegacyFlag("default-scale-down-delay", "value", "10m"),
    LegacyFlag("common-runner-labels", "list", "[]"),
    LegacyFlag("disable-admission-webhook", "bool", "false"),
    LegacyFlag(
        "read-github-config-secret-from-controller-namespace",
        "bool",
        "false",
        reason="not supported: the GitHub config secret is always read from the scale set's namespace",
    ),
    LegacyFlag(
        "update-strategy",
        "value",
        "immediate",
        reason="removed upstream (ARC #4516): updates always roll in place through the runner-set revision",
    ),
)


def _legacy_dest(flag: LegacyFlag) -> str:
    return "legacy_" + flag.name.replace("-", "_")


def add_legacy_flags(parser: argparse.ArgumentParser) -> None:
    """Accept every :data:`LEGACY_FLAGS` flag, in a help group of its own. A flag not given leaves no
    attribute on the parsed namespace, so :func:`legacy_flag_warnings` can tell which were given."""
    legacy = parser.add_argument_group(
        "ARC legacy flags", "accepted so that ARC's args work unchanged; each one given logs one warning and is ignored"
    )
    for flag in LEGACY_FLAGS:
        options: dict[str, Any] = {"dest": _legacy_dest(flag), "default": argparse.SUPPRESS}
        if flag.kind == "bool":
            options["action"] = GoBoolAction
        elif flag.kind == "list":
            options["action"] = "append"
            options["metavar"] = "VALUE"
        else:
            options["metavar"] = "VALUE"
        add_go_flag(legacy, flag.name, help=f"ignored: {flag.reason} (default: {flag.default})", **options)


def legacy_flag_warnings(args: argparse.Namespace) -> list[str]:
    """One line per legacy flag given (however often), saying why it is ignored; values are never shown."""
    return [f"--{flag.name} is ignored: {flag.reason}" for flag in LEGACY_FLAGS if hasattr(args, _legacy_dest(flag))]

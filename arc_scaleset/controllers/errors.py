"""Configuration errors: bad input a user must fix, reported as a condition and an Event, never a crash.

Each class carries ``reason`` (CamelCase, for a condition's ``reason`` and an Event's ``reason``) and a
message that says what is wrong and how to fix it. Messages name Secrets, keys and URLs, never a secret
value. A reconciler that catches one sets its conditions, records a Warning Event and lets the key retry
with backoff: the input may be fixed at any time, and nothing is deleted on the strength of bad input.
"""

# ruff: noqa: N818  (the names read as the condition they report, like the Kubernetes Status reasons)
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pydantic

from arc_scaleset.kube.ownerrefs import claimed_owner
from arc_scaleset.kube.views import ObjectView


class ConfigurationError(Exception):
    """Input the controller cannot use until a user changes it."""

    reason: ClassVar[str] = "InvalidConfiguration"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SecretNotFound(ConfigurationError):
    """A Secret the object names does not exist (or may not be read by the controller)."""

    reason = "SecretNotFound"


class InvalidSecret(ConfigurationError):
    """A Secret exists but its data cannot be used (no credentials, both kinds, malformed key...)."""

    reason = "InvalidSecret"


class InvalidGitHubConfigURL(ConfigurationError):
    """``githubConfigUrl`` is not an enterprise, organization or repository URL."""

    reason = "InvalidGitHubConfigURL"


class TLSConfigError(ConfigurationError):
    """``githubServerTLS`` names a ConfigMap or key that is missing, or the PEM cannot be parsed."""

    reason = "InvalidTLSConfig"


class InvalidVaultConfig(ConfigurationError):
    """``vaultConfig`` cannot be used: an unknown type, a missing field, no certificate file where it points."""

    reason = "InvalidVaultConfig"


class VaultSecretNotFound(ConfigurationError):
    """The vault ``vaultConfig`` names has no secret named by ``githubConfigSecret`` (or a proxy's
    ``credentialSecretRef``)."""

    reason = "VaultSecretNotFound"


class VaultUnavailable(ConfigurationError):
    """The vault or its identity endpoint cannot be reached, or refuses the client (a wrong certificate, no
    access policy). Reported like bad input, since a user usually has to act, and retried with backoff like it,
    since the vault may come back by itself."""

    reason = "VaultUnavailable"


class RunnerGroupNotFound(ConfigurationError):
    """``runnerGroup`` names a runner group that does not exist on GitHub."""

    reason = "RunnerGroupNotFound"


class InvalidSpec(ConfigurationError):
    """The object's spec cannot be read (a field of the wrong type that the CRD schema let through)."""

    reason = "InvalidSpec"


def first_spec_error(exc: pydantic.ValidationError) -> str:
    """The first problem of an object that cannot be read, as ``field.path: what is wrong``
    (``spec.minRunnersSchedule.1.timeZone: Value error, ...``).

    Never pydantic's ``input`` (the value it was given, up to the whole object, templates and all): only the
    field's path and pydantic's message, which quotes no value except where one of the models' own validators
    names what it refuses (a day, a time, a time zone: never a secret field).
    """
    errors = exc.errors()
    if not errors:
        return "invalid spec"
    first = errors[0]
    location = ".".join(str(part) for part in first.get("loc", ()))
    return f"{location}: {first.get('msg', 'invalid')}"


class UnsupportedVersion(ConfigurationError):
    """The object's ``app.kubernetes.io/version`` label names a version this build does not manage."""

    reason = "UnsupportedVersion"


class RunnersAboveCeiling(ConfigurationError):
    """``minRunners`` or ``maxRunners`` is above the controller's ``--max-runners-ceiling``."""

    reason = "RunnersAboveCeiling"


class ObjectInTheWay(ConfigurationError):
    """An object under the deterministic name of one of an object's children is not that object's: it is left
    untouched (never adopted, interpreted or deleted) until someone deletes or renames it. The listener's
    children (:func:`arc_scaleset.controllers.autoscalinglistener.ownership.foreign_reason`) and a runner's pod
    and JIT Secret (:mod:`arc_scaleset.controllers.ephemeralrunner.ownership`)."""

    reason = "ObjectInTheWay"


def in_the_way_message(kind: str, obj: Mapping[str, Any], owner: Mapping[str, Any]) -> str:
    """What ``owner`` says about ``obj`` (a ``kind``), found under the name of ``owner``'s own and not controlled
    by it: which object, whose it claims to be, what to do."""
    view, claimed, mine = ObjectView(obj), claimed_owner(obj), ObjectView(owner)
    claim = (
        "has no controller owner reference" if claimed is None else f"is controlled by {claimed} (UID {claimed.uid})"
    )
    return (
        f"{kind} {view.namespace}/{view.name} holds the name of {mine.kind} {mine.namespace}/{mine.name}'s"
        f" {kind.lower()} but {claim}, not by it (UID {mine.uid}): it is left untouched and waited for; delete or"
        " rename it"
    )


class GitHubAuthenticationStepFailed(ConfigurationError):
    """GitHub answered a step of the authentication chain (installation token, registration token, runner
    registration) with 404 or 403: the credentials cannot administer what ``githubConfigUrl`` names
    (:class:`arc_scaleset.github.AuthenticationStepFailed`). No runner is deleted on the strength of it: a
    runner goes only once GitHub itself has answered for it (removed, not found, or busy)."""

    reason = "GitHubAuthenticationStepFailed"

"""What creating a runner's pod (and, for a fresh registration, its JIT Secret) came to, as a pure function.

The pod step sends both creates at once (the pod only names the Secret; the kubelet waits for it), so it gets
two answers: the pod's (the created object, or the error) and the Secret's (``None``: created or not sent; or
the error). :func:`creation_outcome` reads both and returns one :class:`Creation`; the reconciler acts on it.
Checked in this order:

1. the Secret was not created: ``SECRET_EXISTS`` on AlreadyExists (a leftover of an earlier registration, or
   somebody else's Secret in the way: the next pass reads it and tells which), else ``SECRET_FAILED``. Either
   way a pod that was created is taken back (``pod_uid``): it would wait for a Secret nobody creates, or start
   with a JIT config that may not be its runner's. The registration's status changes are dropped: the next pass
   reads the Secret before it trusts the status;
2. the API server rejected the pod: ``QUOTA_EXCEEDED`` when a Forbidden names an exceeded quota (the pass
   waits), else ``INVALID`` for Invalid or Forbidden, with ARC's message ``Failed to create the pod: <the API
   server's message>`` (tooling matches it; the server's message alone, never our request line);
3. ``POD_EXISTS``: our cache has not seen the pod yet, or someone else holds the name (the reconciler reads the
   pod to tell which: :mod:`.ownership`);
4. ``POD_FAILED``: any other error of the pod create (raised, for the workqueue's backoff);
5. otherwise ``CREATED``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from arc_scaleset.kube.errors import AlreadyExists, Forbidden, Invalid
from arc_scaleset.kube.views import ObjectView

QUOTA_EXCEEDED_MARKER: Final = "exceeded quota:"


class Created(enum.StrEnum):
    CREATED = "Created"
    POD_EXISTS = "PodExists"
    POD_FAILED = "PodFailed"
    INVALID = "Invalid"
    QUOTA_EXCEEDED = "QuotaExceeded"
    SECRET_EXISTS = "SecretExists"
    SECRET_FAILED = "SecretFailed"


@dataclass(frozen=True)
class Creation:
    """The outcome; ``pod_created``: the pod create succeeded (for the ``SECRET_*`` outcomes), ``pod_uid`` the
    created pod's UID; ``message`` for ``INVALID`` and ``QUOTA_EXCEEDED``; ``error``: the exception to raise
    (``*_FAILED``)."""

    outcome: Created
    pod_created: bool = False
    pod_uid: str = ""
    message: str = ""
    error: BaseException | None = None


def creation_outcome(pod: object, secret_error: BaseException | None) -> Creation:
    """See the module docstring. ``pod``: the pod create's result or its exception."""
    pod_created = not isinstance(pod, BaseException)
    pod_uid = ObjectView(pod).uid if pod_created and isinstance(pod, Mapping) else ""
    if isinstance(secret_error, AlreadyExists):
        return Creation(Created.SECRET_EXISTS, pod_created=pod_created, pod_uid=pod_uid)
    if secret_error is not None:
        return Creation(Created.SECRET_FAILED, pod_created=pod_created, pod_uid=pod_uid, error=secret_error)
    if isinstance(pod, Forbidden) and QUOTA_EXCEEDED_MARKER in pod.message:
        return Creation(Created.QUOTA_EXCEEDED, message=pod.message)
    if isinstance(pod, Invalid | Forbidden):
        return Creation(Created.INVALID, message=f"Failed to create the pod: {pod.message}")
    if isinstance(pod, AlreadyExists):
        return Creation(Created.POD_EXISTS)
    if isinstance(pod, BaseException):
        return Creation(Created.POD_FAILED, error=pod)
    return Creation(Created.CREATED, pod_created=True, pod_uid=pod_uid)

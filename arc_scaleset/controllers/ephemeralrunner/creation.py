"""What creating a runner's pod (and, for a fresh registration, its JIT Secret) came to, as a pure function.

The pod step sends both creates at once (the pod only names the Secret; the kubelet waits for it), so it gets
two answers: the pod's (the created object, or the error) and the Secret's (``None``: created or not sent; or
the error). :func:`creation_outcome` reads both and returns one :class:`Creation`; the reconciler acts on it.
Checked in this order:

1. the Secret was not created: ``SECRET_EXISTS`` on AlreadyExists (a leftover of an earlier registration: the
   pod may keep naming it, the next pass reads it), else ``SECRET_FAILED`` (a pod that was created must be
   taken back: it would wait for a Secret nobody creates). Either way the registration's status changes are
   dropped: the next pass reads the Secret before it trusts the status;
2. the API server rejected the pod: ``QUOTA_EXCEEDED`` when a Forbidden names an exceeded quota (the pass
   waits), else ``INVALID`` for Invalid or Forbidden, with ARC's message ``Failed to create the pod: <the API
   server's message>`` (tooling matches it; the server's message alone, never our request line);
3. ``POD_EXISTS``: our cache has not seen the pod yet (or someone else holds the name);
4. ``POD_FAILED``: any other error of the pod create (raised, for the workqueue's backoff);
5. otherwise ``CREATED``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from arc_scaleset.kube.errors import AlreadyExists, Forbidden, Invalid

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
    """The outcome; ``pod_created``: the pod create succeeded (for the ``SECRET_*`` outcomes); ``message`` for
    ``INVALID`` and ``QUOTA_EXCEEDED``; ``error``: the exception to raise (``*_FAILED``)."""

    outcome: Created
    pod_created: bool = False
    message: str = ""
    error: BaseException | None = None


def creation_outcome(pod: object, secret_error: BaseException | None) -> Creation:
    """See the module docstring. ``pod``: the pod create's result or its exception."""
    pod_created = not isinstance(pod, BaseException)
    if isinstance(secret_error, AlreadyExists):
        return Creation(Created.SECRET_EXISTS, pod_created=pod_created)
    if secret_error is not None:
        return Creation(Created.SECRET_FAILED, pod_created=pod_created, error=secret_error)
    if isinstance(pod, Forbidden) and QUOTA_EXCEEDED_MARKER in pod.message:
        return Creation(Created.QUOTA_EXCEEDED, message=pod.message)
    if isinstance(pod, Invalid | Forbidden):
        return Creation(Created.INVALID, message=f"Failed to create the pod: {pod.message}")
    if isinstance(pod, AlreadyExists):
        return Creation(Created.POD_EXISTS)
    if isinstance(pod, BaseException):
        return Creation(Created.POD_FAILED, error=pod)
    return Creation(Created.CREATED, pod_created=True)

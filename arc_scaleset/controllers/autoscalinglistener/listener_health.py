"""What the listener says about itself, turned into the AutoscalingListener's ``Ready`` condition (pure).

A running listener container is not yet a working listener: it may hold no message session (another one holds
the scale set, the service refuses it), or fail every poll. The listener writes its own account on the
EphemeralRunnerSet it scales, when it changes (:class:`~arc_scaleset.api.listener_state.ListenerState`, the
annotation :data:`~arc_scaleset.api.keys.ANNOTATION_LISTENER_STATE`; docs/listener.md). The controller already
caches EphemeralRunnerSets, so it learns of every change through that watch, without polling anything
(:func:`listener_state_changed` lets only those updates through).

- :func:`reported_state`: the state the *current* pod's listener reported, or ``None``: none yet, unreadable,
  or left by a predecessor (a listener killed by SIGKILL never writes that it stopped; its last "Polling" must
  not make its replacement look ready). A state is a predecessor's when it equals what the set carried when this
  controller created the pod, or when it predates the pod by more than :data:`CLOCK_SKEW` (the listener and the
  API server have different clocks).
- :func:`listener_readiness`: ``Ready`` while the container runs: ``True`` only while the listener polls
  (``Polling``), otherwise ``False`` with ``ListenerStarting`` (nothing reported yet), ``WaitingForSession``,
  ``Failing`` or ``Stopped``, the message naming the listener's last error class.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, Final

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.status import REASON_RUNNING, PodReadiness
from arc_scaleset.kube.conditions import format_time
from arc_scaleset.kube.views import ObjectView

INDEX_RUNNER_SET: Final = "arc-scaleset.dev/listener-runner-set"
"""Index of the AutoscalingListener cache: ``<namespace>/<name>`` of the EphemeralRunnerSet a listener scales."""

CLOCK_SKEW: Final = dt.timedelta(seconds=60)
"""How far a listener's clock may lag the API server's before its fresh state is taken for an old one."""

REASON_STARTING: Final = "ListenerStarting"
REASON_WAITING_FOR_SESSION: Final = "WaitingForSession"
REASON_POLL_FAILING: Final = "Failing"
REASON_STOPPED: Final = "Stopped"

_ERROR_WORDS: Final[Mapping[str, str]] = {
    "SessionConflict": "another message session holds the scale set",
    "ScaleSetNotFound": "the scale set no longer exists on GitHub",
    "Unauthorized": "GitHub refused the credentials",
    "RateLimited": "GitHub rate-limits the listener",
    "TransientError": "GitHub failed or gave an unusable answer",
    "TimeoutError": "the Actions service did not answer in time",
    "MessageQueueTokenExpired": "the message queue refused the session's token",
    "SessionNotFound": "the Actions service no longer knows the session",
    "NotFound": "the Actions service no longer knows the session",
}


def runner_set_index(obj: Mapping[str, Any]) -> Iterable[str]:
    """:data:`INDEX_RUNNER_SET` of a cached AutoscalingListener."""
    view = AutoscalingListenerView(obj)
    namespace, name = view.scale_set_namespace, view.ephemeral_runner_set_name
    return (f"{namespace}/{name}",) if namespace and name else ()


def listener_state_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """An EphemeralRunnerSet update concerns its listener only when the listener's state annotation changed."""
    return ObjectView(old).annotation(ANNOTATION_LISTENER_STATE) != ObjectView(new).annotation(
        ANNOTATION_LISTENER_STATE
    )


def state_annotation(runner_set: Mapping[str, Any] | None) -> str:
    """The raw state annotation of an EphemeralRunnerSet (``""``: none)."""
    return ObjectView(runner_set).annotation(ANNOTATION_LISTENER_STATE) if runner_set is not None else ""


def reported_state(
    runner_set: Mapping[str, Any] | None,
    *,
    pod: Mapping[str, Any],
    predecessor: str | None,
) -> ListenerState | None:
    """The state the listener of ``pod`` reported on ``runner_set``; ``None`` when it reported none (module
    docstring). ``predecessor``: the annotation as it was when this controller created ``pod`` (``None``: not
    known, e.g. after a controller restart)."""
    raw = state_annotation(runner_set)
    if not raw or (predecessor is not None and raw == predecessor):
        return None
    state = ListenerState.from_annotation(raw)
    if state is None:
        return None
    created = ObjectView(pod).creation_timestamp
    since = state.since if state.since.tzinfo is not None else state.since.replace(tzinfo=dt.UTC)
    if created is not None and since < created - CLOCK_SKEW:
        return None
    return state


def _error(state: ListenerState) -> str:
    cls = state.last_error_class
    if not cls:
        return ""
    words = _ERROR_WORDS.get(cls)
    return f": {words} ({cls})" if words else f" ({cls})"


def _last_poll(state: ListenerState) -> str:
    if state.last_successful_poll is None:
        return "no poll has succeeded yet"
    return f"last successful poll at {format_time(_utc(state.last_successful_poll))}"


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def listener_readiness(pod_name: str, runner_set: str, state: ListenerState | None) -> PodReadiness:
    """``Ready`` for a running listener container, from what its listener reported (``None``: nothing yet).

    ``runner_set`` is ``<namespace>/<name>`` of the EphemeralRunnerSet the state is read from (for the message).
    Messages change only when the state does, so a listener at rest costs no status write.
    """
    if state is None:
        return PodReadiness(
            False,
            REASON_STARTING,
            f"listener pod {pod_name} runs; waiting for the listener to report its state on EphemeralRunnerSet"
            f" {runner_set}",
            runs=True,
        )
    since = format_time(_utc(state.since))
    if state.state is ListenerPhase.POLLING:
        return PodReadiness(
            True,
            REASON_RUNNING,
            f"listener pod {pod_name} holds a message session and polls it (since {since})",
            runs=True,
        )
    if state.state is ListenerPhase.WAITING_FOR_SESSION:
        return PodReadiness(
            False,
            REASON_WAITING_FOR_SESSION,
            f"the listener holds no message session since {since}{_error(state)}; it keeps trying with backoff"
            f" ({_last_poll(state)})",
            runs=True,
        )
    if state.state is ListenerPhase.FAILING:
        return PodReadiness(
            False,
            REASON_POLL_FAILING,
            f"the listener's polls of its message queue fail since {since}{_error(state)}; it retries with backoff"
            f" ({_last_poll(state)})",
            runs=True,
        )
    return PodReadiness(
        False,
        REASON_STOPPED,
        f"the listener stopped at {since}{_error(state)}",
        runs=True,
    )

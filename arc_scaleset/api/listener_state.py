"""The listener's own account of its state, as it writes it on its EphemeralRunnerSet (docs/listener.md).

The listener writes one annotation, :data:`~arc_scaleset.api.keys.ANNOTATION_LISTENER_STATE`, on the
EphemeralRunnerSet it scales (its Role already allows patching that object, and nothing else it may write is
readable by the controller). The value is a :class:`ListenerState` as compact JSON with camelCase keys::

    {"scaleSetId": 7, "owner": "arc-runners-754b578d-listener", "sessionId": "6a1f...", "state": "Polling",
     "since": "2026-03-01T12:00:00Z", "lastSuccessfulPoll": "2026-03-01T12:00:00Z", "lastErrorClass": ""}

It is written when the state *changes* (another phase, another session, another error class), never per
poll, so an idle set costs no API writes. Two readers:

- the next listener of the same scale set, which ends ``sessionId`` when the service says a session still
  holds the scale set (a predecessor killed before it could delete its session), instead of waiting about
  two minutes for the service to expire it;
- the controller, which may turn it into the AutoscalingListener's conditions and Events.

The model lives here, not in the listener package, so that both sides read the same contract.
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Final

import msgspec

__all__ = ["SCALE_SET_NOT_FOUND", "ListenerPhase", "ListenerState", "canonical_session_id"]

SCALE_SET_NOT_FOUND: Final = "ScaleSetNotFound"
"""``lastErrorClass`` when the service says the scale set does not exist (deleted on GitHub): the listener stops
with it, and the AutoscalingRunnerSet controller, which sees the state on the set it owns, verifies the scale set
and registers it again at once instead of at its next periodic check (docs/controllers.md)."""


class ListenerPhase(enum.StrEnum):
    """Where the listener is. Only ``Polling`` means the scale set is online on GitHub."""

    WAITING_FOR_SESSION = "WaitingForSession"
    """No message session is held: the listener is creating one (``lastErrorClass`` says what went wrong,
    ``SessionConflict`` while another session holds the scale set)."""
    POLLING = "Polling"
    """A session is held and the last poll of its queue succeeded (or none has been made yet)."""
    FAILING = "Failing"
    """A session is held but the last poll failed (``lastErrorClass``); the listener retries with backoff."""
    STOPPED = "Stopped"
    """The listener process ended (shutdown or a fatal error)."""


class ListenerState(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """The annotation's value. Times are UTC; ``sessionId`` is the session this scale set's listener last
    created and does not know to have ended (a successor may delete it), ``None`` when there is none.

    A msgspec Struct rather than a pydantic model: the listener writes it, and pydantic would cost the
    listener process several MB (issue 20).
    """

    scale_set_id: int
    owner: str = ""
    session_id: str | None = None
    state: ListenerPhase
    since: dt.datetime
    last_successful_poll: dt.datetime | None = None
    last_error_class: str = ""

    def to_annotation(self) -> str:
        """Compact JSON, camelCase keys, times as RFC 3339 (UTC with ``Z``)."""
        return _ENCODER.encode(self).decode()

    @classmethod
    def from_annotation(cls, value: str | None) -> ListenerState | None:
        """The state in an annotation value; ``None`` when absent or unreadable (written by someone else).

        A ``sessionId`` that is not a UUID is dropped (read as ``None``): the annotation is on an object the
        scale set's team may write, and a successor puts the ID into the path of a request it sends with the
        scale set's admin token (issue 26), so only the service's own form of an ID is taken.
        """
        if not value:
            return None
        try:
            state = _DECODER.decode(value)
        except msgspec.DecodeError:  # ValidationError included
            return None
        if state.session_id is not None and canonical_session_id(state.session_id) is None:
            return msgspec.structs.replace(state, session_id=None)
        return state

    def same_report(self, other: ListenerState | None) -> bool:
        """Whether ``other`` says the same thing, apart from timestamps (so it need not be written again)."""
        if other is None:
            return False
        return (self.scale_set_id, self.owner, self.session_id, self.state, self.last_error_class) == (
            other.scale_set_id,
            other.owner,
            other.session_id,
            other.state,
            other.last_error_class,
        )


def canonical_session_id(value: str) -> str | None:
    """``value`` as the service writes a session ID (a UUID, lower case, hyphenated); ``None`` when it is none."""
    try:
        canonical = str(uuid.UUID(value))
    except ValueError:
        return None
    # uuid.UUID also reads braces, a "urn:uuid:" prefix and misplaced hyphens: only the plain form is taken.
    return canonical if canonical == value.lower() else None


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(ListenerState)

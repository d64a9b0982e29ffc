"""Where a listener has got to in its message session, recorded for its successor (docs/listener.md, "Leaving no
gap").

The listener writes :data:`~arc_scaleset.api.keys.ANNOTATION_LISTENER_CURSOR` on its EphemeralRunnerSet in the
same merge patch as each decision it publishes (no request of its own), so the record always names the last
message whose decision reached the set::

    {"scaleSetId": 7, "sessionId": "6a1f...", "lastMessageId": 42, "acquiring": [1201, 1202]}

``acquiring`` holds the runner requests the listener asked to acquire and has not seen acquired yet: the service
offers a job once per session, so a successor that resumes the session must ask for them itself. A successor
that finds the session still alive resumes it (refresh, not create) and polls from ``lastMessageId``: a message
delivered to its predecessor and not acted on is delivered again, one acted on is not.

The annotation is on an object the scale set's team may write, so it is read strictly (:meth:`from_annotation`):
a session ID the service would not have written, a negative message ID or too many request IDs make it
unreadable, and the successor starts a session of its own as without a record.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from arc_scaleset.api.listener_state import ListenerState, canonical_session_id

__all__ = ["MAX_RECORDED_REQUESTS", "ListenerCursor", "resumable"]

MAX_RECORDED_REQUESTS: Final = 200
"""The most unconfirmed acquisitions a record carries (a burst beyond it: the rest are offered to a new session,
or stay with the service until the statistics say so, as before this record existed)."""


class ListenerCursor(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """The annotation's value (a msgspec Struct, as :class:`~arc_scaleset.api.listener_state.ListenerState`)."""

    scale_set_id: Annotated[int, msgspec.Meta(gt=0)]
    session_id: str
    last_message_id: Annotated[int, msgspec.Meta(ge=0)]
    acquiring: Annotated[
        tuple[Annotated[int, msgspec.Meta(gt=0)], ...], msgspec.Meta(max_length=MAX_RECORDED_REQUESTS)
    ] = ()

    def to_annotation(self) -> str:
        """Compact JSON with camelCase keys."""
        return _ENCODER.encode(self).decode()

    @classmethod
    def from_annotation(cls, value: str | None) -> ListenerCursor | None:
        """The cursor in an annotation value; ``None`` when absent or not one this listener would have written."""
        if not value:
            return None
        try:
            cursor = _DECODER.decode(value)
        except msgspec.DecodeError:  # ValidationError included
            return None
        return cursor if canonical_session_id(cursor.session_id) == cursor.session_id else None


def resumable(cursor: ListenerCursor | None, state: ListenerState | None, *, scale_set_id: int) -> bool:
    """Whether a new listener of ``scale_set_id`` may resume the session ``cursor`` names (pure): only the session
    its predecessor's recorded ``state`` still names (not one it deleted at shutdown, nor an older one), of this
    scale set (a set registered again on GitHub has a new ID)."""
    return (
        cursor is not None
        and state is not None
        and cursor.scale_set_id == scale_set_id == state.scale_set_id
        and state.session_id is not None
        and cursor.session_id == state.session_id
    )


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(ListenerCursor)

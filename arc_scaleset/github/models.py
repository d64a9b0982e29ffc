"""The Actions service's JSON objects, with the service's field names (docs/github.md).

The models are msgspec Structs, not pydantic models: the listener decodes every message with them, and
msgspec costs it about a tenth of pydantic's memory (issue 20, docs/listener.md "Memory"). Read service JSON
with :func:`from_service`, never by hand: it accepts unknown fields (the service adds some over time), fills
absent ones with Go-style zero values, reads numbers sent as strings, and raises ``msgspec.ValidationError``
naming the field when a value has another type. Timestamps are RFC 3339 (the service sends .NET's seven
fractional digits, rounded to the microsecond); Go's zero time (``0001-01-01T00:00:00Z``) reads as ``None``.
Secrets (``encodedJITConfig``, ``messageQueueAccessToken``) are kept out of ``repr``/``str``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeVar

import msgspec
import orjson

GO_ZERO_TIME = "0001-01-01T00:00:00Z"
NIL_UUID = "00000000-0000-0000-0000-000000000000"
RUNNER_SCALE_SET_JOB_MESSAGES = "RunnerScaleSetJobMessages"


def _read_time(moment: dt.datetime | None) -> dt.datetime | None:
    """A decoded timestamp as the models keep it: ``None`` for Go's zero time, UTC when the zone is missing."""
    if moment is None or moment.year <= 1:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class ServiceModel(msgspec.Struct, rename="camel", kw_only=True):
    """Base: camelCase JSON names (a field's ``name=`` where the service spells it otherwise)."""


_Model = TypeVar("_Model", bound=ServiceModel)


def from_service(model: type[_Model], data: Any) -> _Model:
    """``data`` (decoded JSON) as ``model``; raises ``msgspec.ValidationError`` naming the first bad field.

    A member that is ``null`` reads as if it were absent (its zero value), as Go's decoder reads it into ARC's
    structs: ``"labels": null`` is no labels, not a malformed answer.
    """
    # strict=False: a number or boolean sent as a string is read rather than refused, as the models always
    # did; it costs nothing and a reader stricter than the service's other clients gains nothing.
    return msgspec.convert(_without_nulls(data), model, strict=False)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


class Label(ServiceModel):
    name: str
    type: str = "System"


class RunnerSetting(ServiceModel):
    disable_update: bool = False


class Statistics(ServiceModel):
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0


class RunnerScaleSet(ServiceModel):
    id: int = 0
    name: str = ""
    runner_group_id: int = 0
    runner_group_name: str = ""
    labels: list[Label] = msgspec.field(default_factory=list)
    runner_setting: RunnerSetting = msgspec.field(default_factory=RunnerSetting, name="RunnerSetting")
    created_on: dt.datetime | None = None
    runner_jit_config_url: str = ""
    statistics: Statistics | None = None

    def __post_init__(self) -> None:
        self.created_on = _read_time(self.created_on)

    def request_body(self) -> dict[str, Any]:
        """The body ARC's Go client would send: zero values omitted except ``RunnerSetting`` and ``createdOn``."""
        body: dict[str, Any] = {}
        if self.id:
            body["id"] = self.id
        if self.name:
            body["name"] = self.name
        if self.runner_group_id:
            body["runnerGroupId"] = self.runner_group_id
        if self.runner_group_name:
            body["runnerGroupName"] = self.runner_group_name
        if self.labels:
            body["labels"] = [{"type": label.type or "System", "name": label.name} for label in self.labels]
        body["RunnerSetting"] = {"disableUpdate": True} if self.runner_setting.disable_update else {}
        body["createdOn"] = _go_time(self.created_on)
        if self.runner_jit_config_url:
            body["runnerJitConfigUrl"] = self.runner_jit_config_url
        return body


class RunnerGroup(ServiceModel):
    id: int
    name: str = ""
    size: int = 0
    is_default_group: bool = False


class RunnerReference(ServiceModel):
    """A registered runner (the service calls it an agent)."""

    id: int
    name: str = ""
    runner_scale_set_id: int = 0


class JitConfig(ServiceModel):
    """A just-in-time runner configuration: the registered runner and its one-shot config (a secret)."""

    runner: RunnerReference
    encoded_jit_config: str = msgspec.field(name="encodedJITConfig")

    def __repr__(self) -> str:
        return f"JitConfig(runner={self.runner!r}, encoded_jit_config=<redacted>)"


class MessageSession(ServiceModel):
    """A listener's message session: where and with which token to long-poll for messages.

    The client updates ``message_queue_url``, ``message_queue_access_token`` and ``statistics`` in place
    when it refreshes the session after the queue token expired.
    """

    session_id: str = NIL_UUID
    owner_name: str = ""
    runner_scale_set: RunnerScaleSet | None = None
    message_queue_url: str = ""
    message_queue_access_token: str = ""
    statistics: Statistics | None = None
    # The scale set this session belongs to, remembered from creation (the service may omit runnerScaleSet).
    # A field like the others (msgspec has no private attributes); the service never sends this key.
    _scale_set_id: int = 0

    def __repr__(self) -> str:
        return (
            f"MessageSession(session_id={self.session_id!r}, owner_name={self.owner_name!r},"
            f" message_queue_url={self.message_queue_url!r}, message_queue_access_token=<redacted>)"
        )

    @property
    def scale_set_id(self) -> int:
        if self._scale_set_id:
            return self._scale_set_id
        return self.runner_scale_set.id if self.runner_scale_set else 0

    def replace_with(self, fresh: MessageSession) -> None:
        """Take over everything a refresh returned, keeping the remembered scale set ID."""
        for name in self.__struct_fields__:
            if name != "_scale_set_id":
                setattr(self, name, getattr(fresh, name))


class JobMessageBase(ServiceModel):
    """Fields every job message carries."""

    runner_request_id: int = 0
    repository_name: str = ""
    owner_name: str = ""
    job_id: str = ""
    job_workflow_ref: str = ""
    job_display_name: str = ""
    workflow_run_id: int = 0
    event_name: str = ""
    request_labels: list[str] = msgspec.field(default_factory=list)
    queue_time: dt.datetime | None = None
    scale_set_assign_time: dt.datetime | None = None
    runner_assign_time: dt.datetime | None = None
    finish_time: dt.datetime | None = None

    def __post_init__(self) -> None:
        self.queue_time = _read_time(self.queue_time)
        self.scale_set_assign_time = _read_time(self.scale_set_assign_time)
        self.runner_assign_time = _read_time(self.runner_assign_time)
        self.finish_time = _read_time(self.finish_time)


class JobAvailable(JobMessageBase, tag_field="messageType", tag="JobAvailable"):
    acquire_job_url: str = ""


class JobAssigned(JobMessageBase, tag_field="messageType", tag="JobAssigned"):
    """A job the service assigned to this scale set (no fields beyond the common ones)."""


class JobStarted(JobMessageBase, tag_field="messageType", tag="JobStarted"):
    runner_id: int = 0
    runner_name: str = ""


class JobCompleted(JobMessageBase, tag_field="messageType", tag="JobCompleted"):
    result: str = ""
    runner_id: int = 0
    runner_name: str = ""


# Tagged by their messageType, as msgspec needs for a union of Structs; parse_message picks the type itself so
# that unknown types are skipped rather than refused.
JobMessage = JobAvailable | JobAssigned | JobStarted | JobCompleted

# Each job message type by its tag, the messageType it is sent with.
_JOB_MESSAGE_TYPES: dict[str, type[JobMessageBase]] = {
    str(model.__struct_config__.tag): model for model in (JobAvailable, JobAssigned, JobStarted, JobCompleted)
}


class AcquirableJob(JobMessageBase):
    """An entry of the acquirable-jobs list (shaped like a JobAvailable message)."""

    message_type: str = ""
    acquire_job_url: str = ""


class Message(ServiceModel):
    """One message from the scale set's queue; ``jobs`` is its body, parsed (unknown job types dropped)."""

    message_id: int
    message_type: str
    statistics: Statistics | None = None
    jobs: list[JobMessage] = msgspec.field(default_factory=list)

    @property
    def jobs_available(self) -> list[JobAvailable]:
        return [job for job in self.jobs if isinstance(job, JobAvailable)]

    @property
    def jobs_started(self) -> list[JobStarted]:
        return [job for job in self.jobs if isinstance(job, JobStarted)]

    @property
    def jobs_completed(self) -> list[JobCompleted]:
        return [job for job in self.jobs if isinstance(job, JobCompleted)]


class MessageFormatError(ValueError):
    """A queue message that cannot be read (docs/listener.md, "Poison messages").

    ``message_id`` is the message's ID when that much could be read (the message can then be acknowledged
    and skipped), else ``None`` (the answer is treated as a passing service error). ``reason`` is one of the
    ``UNREADABLE_*`` values, short and stable enough for a metric label.
    """

    def __init__(self, detail: str, *, reason: str, message_id: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.message_id = message_id


UNREADABLE_NO_MESSAGE_ID = "no_message_id"
UNREADABLE_MESSAGE_TYPE = "unsupported_message_type"
UNREADABLE_BODY = "unparsable_body"
UNREADABLE_BODY_SHAPE = "body_not_a_list_of_objects"
UNREADABLE_FIELDS = "invalid_fields"


def _readable_message_id(payload: Any) -> int | None:
    if not isinstance(payload, dict):
        return None
    value = payload.get("messageId")
    # bool is an int in Python, never in the service's JSON.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def parse_message(payload: Any) -> Message:
    """Build a :class:`Message` from the queue's JSON; anything else raises :class:`MessageFormatError`.

    Never raises anything else, whatever ``payload`` is: an array, a message of another type, a body that is
    not JSON or not an array of objects, fields of the wrong type.
    """
    message_id = _readable_message_id(payload)
    if message_id is None:
        kind = "an object" if isinstance(payload, dict) else type(payload).__name__
        raise MessageFormatError(
            f"queue message without a readable messageId (got {kind})", reason=UNREADABLE_NO_MESSAGE_ID
        )
    message_type = payload.get("messageType")
    if message_type != RUNNER_SCALE_SET_JOB_MESSAGES:
        raise MessageFormatError(
            f"unsupported message type {message_type!r}", reason=UNREADABLE_MESSAGE_TYPE, message_id=message_id
        )
    body = payload.get("body") or "[]"
    try:
        elements = orjson.loads(body) if isinstance(body, str | bytes) else body
    except orjson.JSONDecodeError as exc:
        raise MessageFormatError(
            f"message body is not JSON: {exc}", reason=UNREADABLE_BODY, message_id=message_id
        ) from None
    if not isinstance(elements, list) or not all(isinstance(element, dict) for element in elements):
        raise MessageFormatError(
            "message body is not a JSON array of job-message objects",
            reason=UNREADABLE_BODY_SHAPE,
            message_id=message_id,
        )
    try:
        jobs: list[JobMessage] = []
        for element in elements:
            model = _JOB_MESSAGE_TYPES.get(str(element.get("messageType")))
            if model is not None:  # unknown job message types are ignored, as the service may add some
                jobs.append(from_service(model, element))  # type: ignore[arg-type]
        message = from_service(Message, {k: v for k, v in payload.items() if k != "body"})
    except msgspec.ValidationError as exc:
        # msgspec's text names the field and the JSON types ("Expected `int`, got `str` - at `$.runnerId`"),
        # never the value.
        raise MessageFormatError(
            f"message has a field of the wrong type: {exc}", reason=UNREADABLE_FIELDS, message_id=message_id
        ) from None
    message.jobs = jobs
    return message


def _go_time(value: dt.datetime | None) -> str:
    if value is None:
        return GO_ZERO_TIME
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


class ListResponse(ServiceModel):
    """``{count, value: [...]}`` envelopes; the items stay raw for the caller to validate."""

    count: int = 0
    value: list[Any] = msgspec.field(default_factory=list)

"""The Actions service's JSON objects, with the service's field names (docs/github.md) as aliases.

Models accept unknown fields (the service adds some over time) and fill absent ones with Go-style zero
values. Secrets (``encodedJITConfig``, ``messageQueueAccessToken``) are excluded from ``repr``/``str``.
Timestamps are parsed leniently (the service sends .NET's seven fractional digits) and Go's zero time
(``0001-01-01T00:00:00Z``) reads as ``None``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError
from pydantic.alias_generators import to_camel

GO_ZERO_TIME = "0001-01-01T00:00:00Z"
NIL_UUID = "00000000-0000-0000-0000-000000000000"
RUNNER_SCALE_SET_JOB_MESSAGES = "RunnerScaleSetJobMessages"

_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(\.\d+)?(Z|z|[+-]\d{2}:?\d{2})?$")


def _parse_timestamp(value: Any) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str):
        match = _RFC3339.match(value.strip())
        if not match:
            raise ValueError(f"not an RFC 3339 timestamp: {value!r}")
        base, fraction, zone = match.groups()
        micros = (fraction or ".0")[1:7].ljust(6, "0")
        zone = "+00:00" if zone in (None, "Z", "z") else zone
        moment = dt.datetime.fromisoformat(f"{base.replace(' ', 'T')}.{micros}{zone}")
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if moment.year <= 1:  # Go's zero time.Time: "not set"
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


Timestamp = Annotated[dt.datetime | None, BeforeValidator(_parse_timestamp)]


class ServiceModel(BaseModel):
    """Base: camelCase JSON names, unknown fields ignored, Python names accepted too."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


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
    labels: list[Label] = Field(default_factory=list)
    runner_setting: RunnerSetting = Field(default_factory=RunnerSetting, alias="RunnerSetting")
    created_on: Timestamp = None
    runner_jit_config_url: str = ""
    statistics: Statistics | None = None

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
    encoded_jit_config: str = Field(alias="encodedJITConfig", repr=False)


class MessageSession(ServiceModel):
    """A listener's message session: where and with which token to long-poll for messages.

    The client updates ``message_queue_url``, ``message_queue_access_token`` and ``statistics`` in place
    when it refreshes the session after the queue token expired.
    """

    session_id: str = NIL_UUID
    owner_name: str = ""
    runner_scale_set: RunnerScaleSet | None = None
    message_queue_url: str = ""
    message_queue_access_token: str = Field(default="", repr=False)
    statistics: Statistics | None = None
    # The scale set this session belongs to, remembered from creation (the service may omit runnerScaleSet).
    _scale_set_id: int = PrivateAttr(default=0)

    @property
    def scale_set_id(self) -> int:
        if self._scale_set_id:
            return self._scale_set_id
        return self.runner_scale_set.id if self.runner_scale_set else 0

    def replace_with(self, fresh: MessageSession) -> None:
        """Take over everything a refresh returned, keeping the remembered scale set ID."""
        for name in type(self).model_fields:
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
    request_labels: list[str] = Field(default_factory=list)
    queue_time: Timestamp = None
    scale_set_assign_time: Timestamp = None
    runner_assign_time: Timestamp = None
    finish_time: Timestamp = None


class JobAvailable(JobMessageBase):
    message_type: Literal["JobAvailable"] = "JobAvailable"
    acquire_job_url: str = ""


class JobAssigned(JobMessageBase):
    message_type: Literal["JobAssigned"] = "JobAssigned"


class JobStarted(JobMessageBase):
    message_type: Literal["JobStarted"] = "JobStarted"
    runner_id: int = 0
    runner_name: str = ""


class JobCompleted(JobMessageBase):
    message_type: Literal["JobCompleted"] = "JobCompleted"
    result: str = ""
    runner_id: int = 0
    runner_name: str = ""


JobMessage = JobAvailable | JobAssigned | JobStarted | JobCompleted

_JOB_MESSAGE_TYPES: dict[str, type[JobMessageBase]] = {
    "JobAvailable": JobAvailable,
    "JobAssigned": JobAssigned,
    "JobStarted": JobStarted,
    "JobCompleted": JobCompleted,
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
    jobs: list[JobMessage] = Field(default_factory=list)

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
                jobs.append(model.model_validate(element))  # type: ignore[arg-type]
        message = Message.model_validate({k: v for k, v in payload.items() if k != "body"})
    except ValidationError as exc:
        fields = sorted({".".join(str(part) for part in error["loc"]) for error in exc.errors()})
        detail = f"message has fields of the wrong type: {', '.join(fields)}"
        raise MessageFormatError(detail, reason=UNREADABLE_FIELDS, message_id=message_id) from None
    message.jobs = jobs
    return message


def _go_time(value: dt.datetime | None) -> str:
    if value is None:
        return GO_ZERO_TIME
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


class ListResponse(ServiceModel):
    """``{count, value: [...]}`` envelopes; the items stay raw for the caller to validate."""

    count: int = 0
    value: list[Any] = Field(default_factory=list)

"""Error classification of every status docs/github.md names, and one-line messages free of secrets."""

from __future__ import annotations

import pytest

from arc_scaleset.github._secrets import Redactor
from arc_scaleset.github._transport import error_for_response, retry_after_seconds
from arc_scaleset.github.errors import (
    ActionsError,
    FatalError,
    JobStillRunning,
    NotFound,
    RateLimited,
    RunnerExists,
    RunnerNotFound,
    SessionConflict,
    TransientError,
    Unauthorized,
    is_transient,
)

URL = "https://pipelines.example/tenant/_apis/runtime/runnerscalesets?api-version=6.0-preview&name=x"
NOW = 1_800_000_000.0


def classify(status: int, body: bytes = b"", headers: dict[str, str] | None = None, **kwargs: object) -> ActionsError:
    return error_for_response(
        method="GET",
        url=URL,
        status=status,
        reason="Reason",
        headers=headers or {},
        body=body,
        now=NOW,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, FatalError),
        (401, Unauthorized),
        (403, FatalError),
        (404, NotFound),
        (405, FatalError),
        (409, FatalError),
        (422, FatalError),
        (429, RateLimited),
        (500, TransientError),
        (501, FatalError),
        (502, TransientError),
        (503, TransientError),
        (504, TransientError),
    ],
)
def test_status_codes_map_to_error_classes(status: int, cls: type[ActionsError]) -> None:
    assert type(classify(status)) is cls


@pytest.mark.parametrize(
    ("type_name", "status", "cls"),
    [
        ("GitHub.DistributedTask.WebApi.AgentExistsException", 409, RunnerExists),
        ("GitHub.DistributedTask.WebApi.AgentNotFoundException", 404, RunnerNotFound),
        ("GitHub.DistributedTask.WebApi.JobStillRunningException", 400, JobStillRunning),
        ("GitHub.DistributedTask.WebApi.RunnerScaleSetNotFoundException", 400, NotFound),
        ("GitHub.DistributedTask.WebApi.TaskAgentSessionConflictException", 409, SessionConflict),
    ],
)
def test_service_exception_type_names_win_over_status(type_name: str, status: int, cls: type[ActionsError]) -> None:
    body = f'{{"typeName": "{type_name}", "message": "boom"}}'.encode()
    error = classify(status, body, {"Content-Type": "application/json"})
    assert type(error) is cls
    assert error.detail == f"{type_name}: boom"


def test_runner_not_found_is_a_not_found() -> None:
    assert isinstance(classify(404, b'{"typeName":"AgentNotFoundException","message":""}'), NotFound)


def test_overrides_turn_a_session_409_into_session_conflict() -> None:
    assert type(classify(409, overrides={409: SessionConflict})) is SessionConflict


def test_github_403_with_exhausted_rate_limit_is_rate_limited_until_reset() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}
    error = classify(403, b'{"message": "API rate limit exceeded"}', headers)
    assert isinstance(error, RateLimited)
    assert error.retry_after == 42


def test_github_403_secondary_rate_limit_honours_retry_after() -> None:
    error = classify(403, b'{"message": "secondary rate limit"}', {"Retry-After": "60", "x-ratelimit-remaining": "9"})
    assert isinstance(error, RateLimited)
    assert error.retry_after == 60


def test_403_with_budget_left_is_fatal_not_rate_limited() -> None:
    assert type(classify(403, b"", {"x-ratelimit-remaining": "17"})) is FatalError


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "Fri, 15 Jan 2027 08:00:10 GMT", "x-ratelimit-reset": "1"}, 10.0),
        ({"x-ratelimit-reset": str(int(NOW) + 5)}, 5.0),
        ({"x-ratelimit-reset": str(int(NOW) - 5)}, 0.0),
        ({}, None),
        # No wait GitHub asks for is longer than its rate-limit window of an hour; a longer one, or one too large
        # for a float (inf), would park the caller (a listener's poll, a session) for years, or for ever.
        ({"Retry-After": "99999999999"}, 3600.0),
        ({"Retry-After": "9" * 400}, 3600.0),
        ({"x-ratelimit-reset": "9" * 400}, 3600.0),
    ],
)
def test_retry_after_reads_seconds_dates_and_reset_and_never_more_than_an_hour(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after_seconds(headers, now=NOW) == expected


def test_message_is_one_line_with_method_status_and_request_ids() -> None:
    error = classify(
        500,
        b'{"message": "line one\\nline two"}',
        {"Content-Type": "application/json", "ActivityId": "act-1", "X-GitHub-Request-Id": "req-2"},
    )
    assert str(error) == (
        "request GET https://pipelines.example/tenant/_apis/runtime/runnerscalesets?api-version=6.0-preview&name=x "
        'failed(status="500 Reason", activity_id="act-1", github_request_id="req-2"): line one line two'
    )


def test_empty_body_reads_unknown_error_and_bad_json_is_named() -> None:
    assert str(classify(400)).endswith('failed(status="400 Reason"): unknown error')
    assert classify(400, b"{nope", {"Content-Type": "application/json"}).detail == (
        "failed to unmarshal error response body"
    )


def test_secret_query_values_and_known_secrets_never_reach_the_message() -> None:
    redact = Redactor()
    redact.add("queue-token-SECRET")
    error = error_for_response(
        method="GET",
        url="https://broker.example/message?sessionId=abc-SECRET&lastMessageId=3",
        status=400,
        reason="Bad Request",
        headers={},
        body=b'{"message": "bad token queue-token-SECRET"}',
        now=NOW,
        scrub=redact,
    )
    text = str(error)
    assert "SECRET" not in text
    assert "sessionId=***" in text
    assert "lastMessageId=3" in text


def test_user_info_in_a_url_is_dropped() -> None:
    error = ActionsError(method="GET", url="https://user:pw-SECRET@host/path", detail="x")
    assert "SECRET" not in str(error)
    assert str(error) == "request GET https://host/path failed: x"


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (TransientError(method="GET", url=URL), True),
        (RateLimited(retry_after=1, method="GET", url=URL), True),
        (SessionConflict(method="POST", url=URL, status=409), True),
        (FatalError(method="GET", url=URL), False),
        (Unauthorized(method="GET", url=URL, status=401), False),
        (NotFound(method="GET", url=URL, status=404), False),
        (ValueError("x"), False),
    ],
)
def test_is_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


METADATA_ANSWER = (
    b'{"Code": "Success", "AccessKeyId": "ASIAEXAMPLEKEY", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG+bPxRfiCY",'
    b' "Token": "IQoJb3JpZ2luX2VjEXAMPLE"}'
)


def test_a_text_answer_is_named_by_its_content_type_and_length_never_quoted() -> None:
    """A cloud metadata endpoint answers credentials as text/plain JSON: none of it reaches the error."""
    error = classify(404, METADATA_ANSWER, {"Content-Type": "text/plain; charset=utf-8"})
    assert isinstance(error, NotFound)
    assert error.detail == f"the body is not shown (not a JSON error object: text/plain, {len(METADATA_ANSWER)} bytes)"
    assert "Secret" not in str(error)
    assert "ASIA" not in str(error)


def test_the_answer_a_redirect_led_to_is_never_quoted_even_as_a_json_error() -> None:
    body = b'{"message": "SecretAccessKey wJalrXUtnFEMI/K7MDENG", "typeName": "AgentNotFoundException"}'
    error = classify(404, body, {"Content-Type": "application/json"}, redirected=True)
    assert error.detail == f"the body is not shown (an answer a redirect led to: application/json, {len(body)} bytes)"
    assert isinstance(error, RunnerNotFound), "the exception's type name still classifies it"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b'["SecretAccessKey"]', {"Content-Type": "application/json"}),
        (b'{"SecretAccessKey": "x"}', {"Content-Type": "application/json"}),
        (b"SecretAccessKey", {"Content-Type": "text/html SecretAccessKey"}),
    ],
    ids=["a JSON list", "a JSON object without a message", "a content type that is not one"],
)
def test_of_an_answer_that_is_no_json_error_object_nothing_reaches_the_error(
    body: bytes, headers: dict[str, str]
) -> None:
    assert "SecretAccessKey" not in str(classify(400, body, headers))


def test_a_request_id_header_that_is_not_an_identifier_is_left_out() -> None:
    error = classify(400, b"", {"ActivityId": "SecretAccessKey wJalrXUtnFEMI", "X-GitHub-Request-Id": "A1:B2"})
    assert (error.activity_id, error.github_request_id) == (None, "A1:B2")
    assert "wJalrXUtnFEMI" not in str(error)

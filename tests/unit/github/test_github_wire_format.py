"""What goes on the wire: User-Agent JSON, query encoding, request bodies, and parsing of service JSON."""

from __future__ import annotations

import datetime as dt

import orjson
import pytest

from arc_scaleset.github.actions_client import build_service_url, encode_query
from arc_scaleset.github.models import (
    JitConfig,
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    Label,
    MessageFormatError,
    MessageSession,
    RunnerScaleSet,
    RunnerSetting,
    from_service,
    parse_message,
)
from arc_scaleset.github.system_info import SystemInfo


def test_user_agent_is_the_documented_json_object() -> None:
    agent = SystemInfo(version="1.2.3", commit_sha="abc", scale_set_id=7, subsystem="ghalistener").user_agent()
    payload = orjson.loads(agent)
    assert list(payload) == [
        "system",
        "version",
        "commit_sha",
        "scale_set_id",
        "subsystem",
        "build_version",
        "build_commit_sha",
        "kind",
    ]
    assert payload["system"] == "actions-runner-controller"
    assert (payload["version"], payload["commit_sha"], payload["scale_set_id"]) == ("1.2.3", "abc", 7)
    assert (payload["subsystem"], payload["kind"]) == ("ghalistener", "scaleset")


@pytest.mark.parametrize(
    ("base", "relative", "expected"),
    [
        (
            "https://pipelines.example/tenant/",
            "_apis/runtime/runnerscalesets?runnerGroupId=1&name=arc-runners",
            "https://pipelines.example/tenant/_apis/runtime/runnerscalesets"
            "?api-version=6.0-preview&name=arc-runners&runnerGroupId=1",
        ),
        (
            "https://pipelines.example/tenant",
            "/_apis/runtime/runnergroups/?groupName=my group&x=a/b",
            "https://pipelines.example/tenant/_apis/runtime/runnergroups/"
            "?api-version=6.0-preview&groupName=my+group&x=a%2Fb",
        ),
        (
            "https://pipelines.example/tenant/?b=2",
            "_apis/x?api-version=7.0&a=1",
            "https://pipelines.example/tenant/_apis/x?a=1&api-version=7.0&b=2",
        ),
    ],
)
def test_service_urls_join_paths_and_sort_and_encode_the_query(base: str, relative: str, expected: str) -> None:
    assert build_service_url(base, relative) == expected


def test_query_encoding_escapes_like_go() -> None:
    assert encode_query([("name", "a b&c=d+é"), ("agentName", "x~y_z.-")]) == (
        "agentName=x~y_z.-&name=a+b%26c%3Dd%2B%C3%A9"
    )


def test_create_body_omits_zero_fields_but_always_sends_runner_setting_and_created_on() -> None:
    body = RunnerScaleSet(
        name="arc-runners",
        runner_group_id=1,
        labels=[Label(name="arc-runners"), Label(name="gpu", type="")],
        runner_setting=RunnerSetting(disable_update=True),
    ).request_body()
    assert body == {
        "name": "arc-runners",
        "runnerGroupId": 1,
        "labels": [{"type": "System", "name": "arc-runners"}, {"type": "System", "name": "gpu"}],
        "RunnerSetting": {"disableUpdate": True},
        "createdOn": "0001-01-01T00:00:00Z",
    }


def test_update_body_carries_only_the_changed_field() -> None:
    assert RunnerScaleSet(runner_group_id=3).request_body() == {
        "runnerGroupId": 3,
        "RunnerSetting": {},
        "createdOn": "0001-01-01T00:00:00Z",
    }


def test_scale_set_response_parses_with_service_names_and_net_timestamps() -> None:
    scale_set = from_service(
        RunnerScaleSet,
        {
            "id": 5,
            "name": "arc-runners",
            "runnerGroupId": 1,
            "runnerGroupName": "Default",
            "labels": [{"type": "System", "name": "arc-runners"}],
            "RunnerSetting": {"disableUpdate": True},
            "createdOn": "2026-03-01T12:00:00.1234567Z",
            "runnerJitConfigUrl": "https://x/jit",
            "statistics": {"totalAssignedJobs": 2},
            "somethingNew": True,
        },
    )
    assert scale_set.id == 5
    assert scale_set.runner_setting.disable_update
    assert scale_set.created_on == dt.datetime(2026, 3, 1, 12, 0, 0, 123457, tzinfo=dt.UTC)  # to the nearest µs
    assert scale_set.statistics is not None
    assert scale_set.statistics.total_assigned_jobs == 2


def test_null_members_read_as_go_zero_values_instead_of_failing_the_answer() -> None:
    scale_set = from_service(
        RunnerScaleSet,
        {"id": 5, "name": None, "labels": None, "RunnerSetting": None, "createdOn": None, "statistics": None},
    )
    assert (scale_set.id, scale_set.name, scale_set.labels, scale_set.runner_setting.disable_update) == (
        5,
        "",
        [],
        False,
    )
    assert scale_set.created_on is None
    body = [{"messageType": "JobAvailable", "runnerRequestId": 7, "requestLabels": None, "jobWorkflowRef": None}]
    message = parse_message(
        {"messageId": 1, "messageType": "RunnerScaleSetJobMessages", "statistics": None, "body": orjson.dumps(body)}
    )
    assert [(job.runner_request_id, job.request_labels, job.job_workflow_ref) for job in message.jobs_available] == [
        (7, [], "")
    ]


def test_go_zero_time_reads_as_none() -> None:
    assert from_service(RunnerScaleSet, {"createdOn": "0001-01-01T00:00:00Z"}).created_on is None


def test_message_body_is_parsed_into_typed_job_messages_and_unknown_types_dropped() -> None:
    body = [
        {"messageType": "JobAvailable", "runnerRequestId": 456, "acquireJobUrl": "https://x/acquire"},
        {"messageType": "JobAssigned", "runnerRequestId": 456},
        {"messageType": "JobStarted", "runnerRequestId": 455, "runnerId": 4711, "runnerName": "r-x7k2p"},
        {
            "messageType": "JobCompleted",
            "runnerRequestId": 454,
            "result": "succeeded",
            "runnerName": "r-a",
            "finishTime": "2026-03-01T12:00:00Z",
        },
        {"messageType": "SomethingNew", "runnerRequestId": 1},
    ]
    message = parse_message(
        {
            "messageId": 42,
            "messageType": "RunnerScaleSetJobMessages",
            "statistics": {"totalAvailableJobs": 1, "totalAssignedJobs": 2},
            "body": orjson.dumps(body).decode(),
        }
    )
    assert message.message_id == 42
    assert [type(job) for job in message.jobs] == [JobAvailable, JobAssigned, JobStarted, JobCompleted]
    assert message.jobs_available[0].acquire_job_url == "https://x/acquire"
    assert (message.jobs_started[0].runner_id, message.jobs_started[0].runner_name) == (4711, "r-x7k2p")
    assert message.jobs_completed[0].result == "succeeded"
    assert message.statistics is not None
    assert message.statistics.total_assigned_jobs == 2


def test_a_message_of_another_type_is_an_error() -> None:
    with pytest.raises(MessageFormatError, match="unsupported message type 'SomethingElse'"):
        parse_message({"messageId": 1, "messageType": "SomethingElse", "body": "[]"})


def test_a_message_body_that_is_not_an_array_is_an_error() -> None:
    with pytest.raises(MessageFormatError):
        parse_message({"messageId": 1, "messageType": "RunnerScaleSetJobMessages", "body": '{"a": 1}'})


def test_jit_config_and_session_tokens_stay_out_of_repr_and_str() -> None:
    jit = from_service(
        JitConfig, {"runner": {"id": 1, "name": "r", "runnerScaleSetId": 2}, "encodedJITConfig": "SECRETJIT"}
    )
    session = from_service(
        MessageSession, {"sessionId": "s", "messageQueueUrl": "https://q", "messageQueueAccessToken": "SECRETQUEUE"}
    )
    assert jit.encoded_jit_config == "SECRETJIT"
    for text in (repr(jit), str(jit), repr(session), str(session), repr([jit, session])):
        assert "SECRET" not in text


def test_session_refresh_replaces_everything_but_keeps_the_scale_set_id() -> None:
    session = from_service(MessageSession, {"sessionId": "s", "messageQueueUrl": "https://q/1"})
    session._scale_set_id = 9
    session.replace_with(from_service(MessageSession, {"sessionId": "s", "messageQueueUrl": "https://q/2"}))
    assert (session.message_queue_url, session.scale_set_id) == ("https://q/2", 9)

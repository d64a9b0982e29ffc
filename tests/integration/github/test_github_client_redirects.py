"""The client follows GitHub's redirects as ARC's Go client does: a repository renamed since its config URL was
written still gets runners, credentials never go to another host, and a redirect loop ends in a clear error.

The simulated service plays the renamed repository; loopback servers play the redirects GitHub never sends
(a loop, another host).
"""

from __future__ import annotations

import pytest
from aiohttp import web

from arc_scaleset.github import (
    ActionsClient,
    AuthenticationStepFailed,
    FatalError,
    PersonalAccessToken,
    ProxySettings,
    SystemInfo,
    TransientError,
    is_transient,
    parse_config_url,
)
from tests.http_serving import serving
from tests.integration.github.conftest import PAT, InstantClock, SimFactory, client_for

REGISTRATION_TOKEN = "/api/v3/orgs/org/actions/runners/registration-token"
METADATA_PATH = "/latest/meta-data/iam/security-credentials/node-role"
METADATA_ANSWER = '{"Code": "Success", "AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG"}'


async def test_a_repository_renamed_since_its_config_url_was_written_still_gets_runners(
    start_sim: SimFactory,
) -> None:
    async with start_sim(renamed_repositories={"my-org/old-name": "my-org/new-name"}) as sim:
        config = parse_config_url(sim.config_url("my-org", "old-name"))
        credentials = PersonalAccessToken(PAT)
        info = SystemInfo(subsystem="contract-test")
        async with ActionsClient(config, credentials, system_info=info, clock=InstantClock()) as client:
            group = await client.get_runner_group_by_name("Default")
            created = await client.create_runner_scale_set(name="renamed", runner_group_id=group.id, labels=[])
            jit = await client.generate_jit_runner_config(created.id, name="renamed-runner-1")
        assert jit.runner.name == "renamed-runner-1"
        answers = [(r.path, r.status) for r in sim.requests if r.route == "registration_token"]
        assert answers == [
            ("/api/v3/repos/my-org/old-name/actions/runners/registration-token", 307),
            ("/api/v3/repos/my-org/new-name/actions/runners/registration-token", 201),
        ]


async def test_a_redirect_loop_ends_after_ten_redirects_with_an_error_that_is_not_retried() -> None:
    async def loop(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(request.path)

    async with serving(loop) as (base, seen), client_for(base) as client:
        with pytest.raises(FatalError, match="stopped after 10 redirects") as caught:
            await client.get_runner_group_by_name("Default")
    assert not is_transient(caught.value)
    assert seen == [REGISTRATION_TOKEN] * 11, "the first request and ten redirects, in one attempt"


async def test_a_redirect_to_another_host_is_refused_and_nothing_is_sent_there() -> None:
    arrived: list[str] = []

    async def elsewhere(request: web.Request) -> web.StreamResponse:
        arrived.append(request.method)
        return web.json_response({"message": "Not Found"}, status=404)

    async with serving(elsewhere) as (other_base, _):
        # "localhost" is another host than "127.0.0.1" to a client, though the same machine.
        target = other_base.replace("127.0.0.1", "localhost") + "/moved"

        async def moved(_: web.Request) -> web.StreamResponse:
            raise web.HTTPTemporaryRedirect(target)

        async with serving(moved) as (base, _), client_for(base) as client:
            with pytest.raises(FatalError, match=r"redirected to another host \(localhost\)") as caught:
                await client.get_runner_group_by_name("Default")
    assert not is_transient(caught.value)
    assert arrived == []


async def test_a_see_other_to_the_metadata_endpoint_is_refused_and_nothing_of_its_answer_reaches_the_error() -> None:
    """Issue 26: a GHES host (http allowed) answers 303 to the cloud metadata endpoint, whose answer came back in
    the scale set's condition. A loopback proxy plays the metadata endpoint, so nothing leaves this machine
    whatever the client does."""
    metadata_requests: list[str] = []

    async def metadata(request: web.Request) -> web.StreamResponse:
        metadata_requests.append(str(request.url))
        return web.Response(text=METADATA_ANSWER, content_type="text/plain")

    async def ghes(_: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(f"http://169.254.169.254{METADATA_PATH}")

    async with (
        serving(metadata) as (proxy, _),
        serving(ghes) as (base, _),
        client_for(base, proxy=ProxySettings(http_proxy=proxy), retry_max=0) as client,
    ):
        with pytest.raises(FatalError) as caught:
            await client.get_runner_group_by_name("Default")
    text = str(caught.value)
    assert "redirected to another host (169.254.169.254)" in text
    for part in ("SecretAccessKey", "wJalrXUtnFEMI", "security-credentials"):
        assert part not in text
    assert metadata_requests == []


async def test_a_redirect_whose_location_carries_a_password_without_a_user_is_refused_not_a_crash() -> None:
    # User information in a location is refused; a password with an empty user name is user information too (the
    # HTTP client would turn it into Basic credentials beside the token, and give up with a ValueError).
    async def moved(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(f"http://:hunter2@{request.host}/moved")

    async with serving(moved) as (base, seen), client_for(base) as client:
        with pytest.raises(FatalError, match="redirected to an unusable location") as caught:
            await client.get_runner_group_by_name("Default")
    assert "hunter2" not in str(caught.value)
    assert not is_transient(caught.value)
    assert seen == [REGISTRATION_TOKEN]


async def test_a_redirect_to_the_same_host_on_another_port_does_not_get_the_token() -> None:
    arrived: list[str | None] = []

    async def other_port(request: web.Request) -> web.StreamResponse:
        arrived.append(request.headers.get("Authorization"))
        return web.json_response({"message": "Not Found"}, status=404)

    async with serving(other_port) as (other_base, _):

        async def moved(_: web.Request) -> web.StreamResponse:
            raise web.HTTPTemporaryRedirect(other_base + "/moved")

        async with serving(moved) as (base, _), client_for(base, retry_max=0) as client:
            with pytest.raises(AuthenticationStepFailed):
                await client.get_runner_group_by_name("Default")
    assert arrived == [None]


async def test_the_answer_a_redirect_led_to_is_named_by_its_content_type_and_length_only() -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == REGISTRATION_TOKEN:
            raise web.HTTPTemporaryRedirect("/internal")
        return web.Response(status=500, text=METADATA_ANSWER, content_type="text/plain")

    async with serving(answer) as (base, _), client_for(base, retry_max=0) as client:
        with pytest.raises(TransientError) as caught:
            await client.get_runner_group_by_name("Default")
    assert str(caught.value).endswith(
        f"the body is not shown (an answer a redirect led to: text/plain, {len(METADATA_ANSWER)} bytes)"
    )


async def test_a_see_other_answer_to_a_post_is_followed_with_a_get_that_keeps_the_token_on_the_same_host() -> None:
    arrived: list[tuple[str, str, str | None]] = []

    async def see_other(request: web.Request) -> web.StreamResponse:
        arrived.append((request.method, request.path, request.headers.get("Authorization")))
        if request.path == REGISTRATION_TOKEN:
            raise web.HTTPSeeOther("/elsewhere")
        return web.json_response({"message": "Not Found"}, status=404)

    async with serving(see_other) as (base, _), client_for(base) as client:
        with pytest.raises(AuthenticationStepFailed):
            await client.get_runner_group_by_name("Default")
    assert [(method, path) for method, path, _ in arrived] == [("POST", REGISTRATION_TOKEN), ("GET", "/elsewhere")]
    assert arrived[1][2] == arrived[0][2] == f"Bearer {PAT}"


async def test_a_get_after_see_other_stays_bodiless_and_credentials_lost_on_the_way_are_not_given_back() -> None:
    arrived: list[tuple[str, str, bytes, str | None]] = []
    ports: list[str] = []

    async def chain(request: web.Request) -> web.StreamResponse:
        arrived.append((request.method, request.path, await request.read(), request.headers.get("Authorization")))
        if request.path == REGISTRATION_TOKEN:
            raise web.HTTPSeeOther("/second")
        if request.path == "/second":
            raise web.HTTPTemporaryRedirect(ports[0] + "/third")
        if request.path == "/third":
            raise web.HTTPTemporaryRedirect(ports[1] + "/fourth")
        return web.json_response({"message": "Not Found"}, status=404)

    async with serving(chain) as (other, _), serving(chain) as (base, _):
        ports.extend([other, base])
        async with client_for(base, retry_max=0) as client:
            with pytest.raises(AuthenticationStepFailed):
                await client.get_runner_group_by_name("Default")
    assert [(method, path, body) for method, path, body, _ in arrived] == [
        ("POST", REGISTRATION_TOKEN, b""),
        ("GET", "/second", b""),
        ("GET", "/third", b""),
        ("GET", "/fourth", b""),
    ]
    assert [authorization is not None for *_, authorization in arrived] == [True, True, False, False]

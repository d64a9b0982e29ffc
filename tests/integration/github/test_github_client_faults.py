"""Each injected fault and the client's reaction, against the simulated service over real HTTP.

Time: retries and token expiry run on an :class:`InstantClock` (sleeps are recorded, not waited), so the
tests check *what* the client waited for and never measure elapsed time.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import re

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from arc_scaleset.github import (
    ActionsClient,
    AuthenticationStepFailed,
    FatalError,
    GitHubApp,
    MessageQueueTokenExpired,
    NotFound,
    PersonalAccessToken,
    RateLimited,
    SessionNotFound,
    SystemInfo,
    TransientError,
    TransportOptions,
    Unauthorized,
    parse_config_url,
)
from arc_scaleset_lab.sim.faults import FaultRule
from arc_scaleset_lab.sim.server import SimulatedGitHub
from tests.http_serving import serving
from tests.integration.github.conftest import PAT, InstantClock, SimFactory, make_client


def count(sim: SimulatedGitHub, route: str) -> int:
    return sum(1 for record in sim.requests if record.route == route)


async def test_a_burst_of_5xx_is_retried_with_growing_jittered_waits(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=503, count=3))
    async with make_client(sim, clock=instant_clock) as client:
        group = await client.get_runner_group_by_name("Default")
    assert group.id == 1
    assert count(sim, "get_runner_groups") == 4
    assert len(instant_clock.sleeps) == 3
    for wait, base in zip(instant_clock.sleeps, (1.0, 2.0, 4.0), strict=True):
        assert base <= wait <= base * 1.1


async def test_5xx_beyond_the_retry_budget_raises_a_transient_error(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=500, count=None))
    async with make_client(sim, clock=instant_clock, retry_max=2) as client:
        with pytest.raises(TransientError) as caught:
            await client.get_runner_group_by_name("Default")
    assert count(sim, "get_runner_groups") == 3
    assert "giving up after 3 attempt(s)" in str(caught.value)
    assert 'status="500' in str(caught.value)


async def test_501_is_not_retried(sim: SimulatedGitHub, instant_clock: InstantClock) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=501, count=None))
    async with make_client(sim, clock=instant_clock) as client:
        with pytest.raises(FatalError):
            await client.get_runner_group_by_name("Default")
    assert count(sim, "get_runner_groups") == 1


async def test_a_dropped_connection_is_retried(sim: SimulatedGitHub, instant_clock: InstantClock) -> None:
    # Two drops: aiohttp itself silently re-sends a request once when a *reused* keep-alive connection
    # fails, so only the second drop is guaranteed to reach our retry loop.
    sim.faults.add(FaultRule(route="get_runner_groups", drop_connection=True, count=2))
    async with make_client(sim, clock=instant_clock) as client:
        assert (await client.get_runner_group_by_name("Default")).id == 1
    assert 1 <= len(instant_clock.sleeps) <= 2


async def test_429_waits_exactly_the_retry_after_then_succeeds(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=429, retry_after=3, count=1))
    async with make_client(sim, clock=instant_clock) as client:
        assert (await client.get_runner_group_by_name("Default")).id == 1
    assert instant_clock.sleeps == [3.0]


async def test_a_retry_after_of_0_still_waits_the_backoff_between_attempts(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=429, retry_after=0, count=2))
    async with make_client(sim, clock=instant_clock) as client:
        assert (await client.get_runner_group_by_name("Default")).id == 1
    assert len(instant_clock.sleeps) == 2
    for wait, base in zip(instant_clock.sleeps, (1.0, 2.0), strict=True):
        assert base <= wait <= base * 1.1


async def test_a_long_retry_after_is_handed_to_the_caller_instead_of_blocking(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=429, retry_after=3600, count=1))
    async with make_client(sim, clock=instant_clock) as client:
        with pytest.raises(RateLimited) as caught:
            await client.get_runner_group_by_name("Default")
    assert caught.value.retry_after == 3600
    assert instant_clock.sleeps == []


async def test_a_503_asking_for_a_longer_wait_than_the_client_sits_out_is_handed_to_the_caller_at_once(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    # Sat out here, it parked the caller (a reconcile worker, a listener's session call) for 11 days.
    sim.faults.add(FaultRule(route="get_runner_groups", status=503, retry_after=999999, count=None))
    async with make_client(sim, clock=instant_clock) as client:
        with pytest.raises(TransientError):
            await client.get_runner_group_by_name("Default")
    assert instant_clock.sleeps == []
    assert count(sim, "get_runner_groups") == 1


async def test_a_slow_service_hits_the_timeout_and_raises_transient_error(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    # The sim holds each request 2 s (real time); the client gives up on each attempt after 0.2 s.
    sim.faults.add(FaultRule(route="get_runner_groups", latency=2.0, count=2))
    async with make_client(sim, clock=instant_clock, request_timeout=0.2, retry_max=1) as client:
        with pytest.raises(TransientError) as caught:
            await client.get_runner_group_by_name("Default")
    assert "giving up after 2 attempt(s): timed out" in str(caught.value)
    assert len(instant_clock.sleeps) == 1


async def test_an_expired_queue_token_is_refreshed_once_and_the_poll_repeated(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        scale_set = await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
        session = await client.create_message_session(scale_set.id, "owner")
        old_token = session.message_queue_access_token
        sim.state.expire_queue_tokens()
        request_id = sim.state.enqueue_job("arc-runners").request_id
        message = await client.get_message(session, 0, max_capacity=5)
        assert message is not None
        assert session.message_queue_access_token != old_token  # refreshed in place
        assert count(sim, "refresh_session") == 1
        sim.state.expire_queue_tokens()
        assert await client.acquire_jobs(session, scale_set.id, [request_id]) == [request_id]
        assert count(sim, "refresh_session") == 2


async def test_a_queue_token_rejected_after_refresh_raises_token_expired(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        scale_set = await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
        session = await client.create_message_session(scale_set.id, "owner")
        sim.faults.add(FaultRule(route="get_message", status=401, count=2))
        with pytest.raises(MessageQueueTokenExpired):
            await client.get_message(session, 0, max_capacity=5)
    assert count(sim, "refresh_session") == 1


async def test_an_evicted_session_surfaces_as_session_not_found(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        scale_set = await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
        session = await client.create_message_session(scale_set.id, "owner")
        assert sim.state.evict_session(scale_set.id)
        with pytest.raises(SessionNotFound):
            await client.get_message(session, 0, max_capacity=5)


@pytest.mark.parametrize(
    "answer",
    [
        "<html>sign in to the proxy</html>",
        [{"sessionId": "00000000-0000-0000-0000-000000000001"}],
        {"sessionId": 5, "messageQueueUrl": ["not", "a", "url"]},
        {"ownerName": "owner"},
        {"sessionId": "00000000-0000-0000-0000-000000000001", "messageQueueUrl": "http://queue.example/x"},
    ],
    ids=["a-string", "an-array", "fields-of-the-wrong-type", "no-session-or-queue", "no-queue-token"],
)
async def test_a_session_answer_that_cannot_be_used_is_a_passing_error_and_never_fatal(
    sim: SimulatedGitHub, instant_clock: InstantClock, monkeypatch: pytest.MonkeyPatch, answer: object
) -> None:
    # A 200 whose body is no usable session (a proxy's page, a truncated or changed answer) is not the service
    # refusing the request: the listener must try again later, not exit as it does on a FatalError.
    from arc_scaleset_lab.sim import routes_actions

    monkeypatch.setattr(routes_actions, "session_json", lambda *_args: answer)
    async with make_client(sim, clock=instant_clock) as client:
        scale_set = await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
        with pytest.raises(TransientError) as created:
            await client.create_message_session(scale_set.id, "owner")
        held = sim.state.sessions[scale_set.id].id  # the service made the session; its answer was lost
        with pytest.raises(TransientError) as refreshed:
            await client.refresh_message_session(scale_set.id, held)
    for caught in (created, refreshed):
        assert not isinstance(caught.value, FatalError)
        assert "no usable message session" in str(caught.value)


async def test_a_revoked_admin_token_is_refreshed_once(sim: SimulatedGitHub, instant_clock: InstantClock) -> None:
    async with make_client(sim, clock=instant_clock) as client:
        await client.get_runner_group_by_name("Default")
        sim.credentials.expire_admin_tokens()
        await client.get_runner_group_by_name("Default")
    assert count(sim, "runner_registration") == 2


async def test_admin_token_is_refreshed_only_within_60_seconds_of_expiry(start_sim: SimFactory) -> None:
    clock = InstantClock()
    async with start_sim(clock=clock, admin_token_ttl=600) as sim, make_client(sim, clock=clock) as client:
        await client.get_runner_group_by_name("Default")
        assert count(sim, "runner_registration") == 1
        await clock.advance(539)  # 61 s left: still fresh
        await client.get_runner_group_by_name("Default")
        assert count(sim, "runner_registration") == 1
        await clock.advance(2)  # 59 s left: refreshed before use
        await client.get_runner_group_by_name("Default")
        assert count(sim, "runner_registration") == 2
        assert count(sim, "registration_token") == 2


async def test_wrong_pat_is_unauthorized_and_the_error_does_not_quote_it(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    wrong = "ghp_wrong_token_SECRET_987654321"
    async with make_client(sim, clock=instant_clock, credentials=PersonalAccessToken(wrong)) as client:
        with pytest.raises(Unauthorized) as caught:
            await client.get_runner_group_by_name("Default")
    assert "bad or expired token" in str(caught.value)
    assert wrong not in str(caught.value)
    assert PAT not in str(caught.value)


async def test_unknown_org_names_the_scope(sim: SimulatedGitHub, instant_clock: InstantClock) -> None:
    sim.faults.add(FaultRule(route="registration_token", status=404, message="Not Found"))
    async with make_client(sim, clock=instant_clock, org="no-such-org") as client:
        with pytest.raises(AuthenticationStepFailed) as caught:
            await client.get_runner_group_by_name("Default")
    assert "organization no-such-org" in str(caught.value)


@pytest.mark.parametrize(
    ("route", "status"),
    [("registration_token", 404), ("registration_token", 403), ("runner_registration", 404)],
)
async def test_a_404_or_403_from_an_authentication_step_is_never_a_runner_not_found(
    sim: SimulatedGitHub, instant_clock: InstantClock, route: str, status: int
) -> None:
    """A PAT that lost its access to the organization: the removal of a runner must not read "already gone"."""
    sim.faults.add(FaultRule(route=route, status=status, count=None, message="Not Found"))
    async with make_client(sim, clock=instant_clock, retry_max=0) as client:
        with pytest.raises(AuthenticationStepFailed) as caught:
            await client.remove_runner(42)
    assert not isinstance(caught.value, NotFound)
    assert caught.value.step in str(caught.value)
    assert not [r for r in sim.requests if r.route == "remove_runner"], "the removal itself was never asked"


def _app_key() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


async def test_github_app_credentials_mint_an_installation_token_and_cache_it(
    start_sim: SimFactory,
) -> None:
    clock = InstantClock()
    private, public = _app_key()
    async with start_sim(clock=clock, admin_token_ttl=600) as sim:
        sim.credentials.add_app(app_id=123, installation_ids=[456], public_key_pem=public)
        app = GitHubApp("123", 456, private)
        async with make_client(sim, clock=clock, credentials=app) as client:
            await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
            await clock.advance(560)  # the admin token needs renewing; the 1 h installation token does not
            assert await client.get_runner_scale_set(1, "arc-runners") is not None
    assert count(sim, "app_access_token") == 1
    assert count(sim, "runner_registration") == 2


async def test_an_installation_token_revoked_before_its_expiry_is_replaced_on_the_next_call(
    start_sim: SimFactory,
) -> None:
    clock = InstantClock()
    private, public = _app_key()
    async with start_sim(clock=clock) as sim:
        sim.credentials.add_app(app_id=123, installation_ids=[456], public_key_pem=public)
        async with make_client(sim, clock=clock, credentials=GitHubApp("123", 456, private)) as client:
            await client.create_runner_scale_set(name="arc-runners", runner_group_id=1)
            # GitHub revokes the installation token (and with it the admin token) long before its 1 h expiry.
            sim.credentials.expire_installation_tokens()
            sim.credentials.expire_admin_tokens()

            assert await client.get_runner_scale_set(1, "arc-runners") is not None
    assert count(sim, "app_access_token") == 2
    assert count(sim, "registration_token") == 3  # first chain, the revoked token's 401, the fresh token


async def test_an_installation_token_rejected_right_after_minting_is_not_retried_forever(
    start_sim: SimFactory,
) -> None:
    clock = InstantClock()
    private, public = _app_key()
    async with start_sim(clock=clock) as sim:
        sim.credentials.add_app(app_id=123, installation_ids=[456], public_key_pem=public)
        sim.faults.add(FaultRule(route="registration_token", status=401, count=None, message="Bad credentials"))
        async with make_client(sim, clock=clock, credentials=GitHubApp("123", 456, private)) as client:
            with pytest.raises(Unauthorized, match="bad or expired token"):
                await client.get_runner_group_by_name("Default")
    assert count(sim, "app_access_token") == 1
    assert count(sim, "registration_token") == 1


async def test_an_app_without_that_installation_gets_one_clear_error(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    private, public = _app_key()
    sim.credentials.add_app(app_id=123, installation_ids=[456], public_key_pem=public)
    async with make_client(sim, clock=instant_clock, credentials=GitHubApp("123", 999, private)) as client:
        with pytest.raises(AuthenticationStepFailed) as caught:
            await client.get_runner_group_by_name("Default")
    assert "GitHub App 123 has no installation 999" in str(caught.value)


async def test_an_app_signed_with_another_key_is_unauthorized(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    _, public = _app_key()
    other_private, _ = _app_key()
    sim.credentials.add_app(app_id=123, installation_ids=[456], public_key_pem=public)
    async with make_client(sim, clock=instant_clock, credentials=GitHubApp("123", 456, other_private)) as client:
        with pytest.raises(Unauthorized, match="wrong App ID or private key"):
            await client.get_runner_group_by_name("Default")


async def test_an_admin_401_that_survives_a_refresh_is_unauthorized(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    sim.faults.add(FaultRule(route="get_runner_groups", status=401, count=2))
    async with make_client(sim, clock=instant_clock) as client:
        with pytest.raises(Unauthorized):
            await client.get_runner_group_by_name("Default")
    assert count(sim, "runner_registration") == 2
    assert count(sim, "get_runner_groups") == 2


async def test_an_app_jwt_from_a_clock_five_minutes_ahead_is_dated_again_by_githubs_clock(
    sim: SimulatedGitHub, instant_clock: InstantClock
) -> None:
    """GitHub refuses a JWT issued in its future: a clock more than 60 s ahead made every App call fail with
    "wrong App ID or private key". The refusal's Date header measures the skew; the JWT is dated again, once."""
    private, public = _app_key()
    sim.credentials.add_app(app_id=123, installation_ids=[456], public_key_pem=public)
    await instant_clock.sleep(300)  # this machine's clock runs five minutes ahead of GitHub's (the sim's)
    async with make_client(sim, clock=instant_clock, credentials=GitHubApp("123", 456, private)) as client:
        group = await client.get_runner_group_by_name("Default")
        assert group.name == "Default"
        client._auth._installation_token = None  # the next installation token is dated right at once
        await client._auth.admin(force=True)
    assert [r.status for r in sim.requests if r.route == "app_access_token"] == [401, 201, 201]


async def test_a_jwt_refused_even_when_dated_by_githubs_clock_says_the_clock_is_not_the_cause() -> None:
    private, _ = _app_key()
    behind = email.utils.format_datetime(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5), usegmt=True)
    dates: list[str] = []

    async def refuse(_: web.Request) -> web.StreamResponse:
        dates.append(behind)
        return web.json_response({"message": "A JSON web token could not be decoded"}, status=401,
                                 headers={"Date": behind})  # fmt: skip

    async with (
        serving(refuse) as (base, _),
        ActionsClient(
            parse_config_url(f"{base}/org"),
            GitHubApp("123", 456, private),
            system_info=SystemInfo(subsystem="contract-test"),
            transport=TransportOptions(retry_max=0),
            clock=InstantClock(),
        ) as client,
    ):
        with pytest.raises(Unauthorized) as caught:
            await client.get_runner_group_by_name("Default")
    assert len(dates) == 2, "dated again once, by the Date header"
    assert re.search(
        r"wrong App ID or private key \(the JWT was dated by GitHub's clock, as this machine's is 30[01] s ahead of"
        r" it: the clock is not the cause\)",
        str(caught.value),
    )

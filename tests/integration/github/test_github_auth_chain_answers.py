"""What the authentication chain makes of odd answers, from a small server on loopback playing GitHub.

- A step that GitHub accepted (2xx) but whose answer carries nothing usable (a proxy's page, a truncated body,
  no token) is a :class:`TransientError` naming the step and the config URL, never a :class:`FatalError`,
  which would end the listener; and never quoting the body or a token.
- Callers that waited for a refresh that failed get its failure: one failure costs one request.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from collections.abc import Callable

import orjson
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from arc_scaleset.github import (
    ActionsClient,
    Credentials,
    FatalError,
    GitHubApp,
    PersonalAccessToken,
    SystemInfo,
    TransientError,
    TransportOptions,
    is_transient,
    parse_config_url,
)
from tests.http_serving import serving
from tests.integration.github.conftest import PAT, InstantClock

INSTALLATION = "/api/v3/app/installations/456/access_tokens"
REGISTRATION = "/api/v3/orgs/org/actions/runners/registration-token"
RUNNER_REGISTRATION = "/api/v3/actions/runner-registration"
PROXY_PAGE = "<html><body>Sign in to the corporate proxy: session 7f3a</body></html>"
NOT_A_JWT = "admin-token-that-is-no-jwt-0123456789"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def admin_jwt() -> str:
    """A JWT as the service's admin token is one: the client reads its ``exp`` and never verifies it."""
    exp = int((dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).timestamp())
    return ".".join([_b64(b'{"alg":"HS256","typ":"JWT"}'), _b64(orjson.dumps({"exp": exp})), _b64(b"signature")])


def good_answer(path: str, base: str) -> web.Response:
    """GitHub's answer to each step of the chain."""
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    if path == INSTALLATION:
        return web.json_response({"token": "ghs_installation_token_0123456789", "expires_at": expires}, status=201)
    if path == REGISTRATION:
        return web.json_response({"token": "AREGISTRATIONTOKEN0123456789", "expires_at": expires}, status=201)
    if path == RUNNER_REGISTRATION:
        return web.json_response({"url": f"{base}/tenant/", "token": admin_jwt()})
    return web.json_response({"count": 0, "value": []})


def app_credentials() -> GitHubApp:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return GitHubApp("123", 456, pem.decode())


def client(base: str, credentials: Credentials) -> ActionsClient:
    return ActionsClient(
        parse_config_url(f"{base}/org"),
        credentials,
        system_info=SystemInfo(subsystem="contract-test"),
        transport=TransportOptions(request_timeout=10.0, retry_max=0),
        clock=InstantClock(),
    )


Odd = Callable[[], web.Response]


@pytest.mark.parametrize(
    ("step_path", "odd", "said"),
    [
        (
            REGISTRATION,
            lambda: web.Response(text=PROXY_PAGE, content_type="text/html", status=201),
            "the registration token answer is not a JSON object",
        ),
        (
            REGISTRATION,
            lambda: web.json_response({"expires_at": "2030-01-01T00:00:00Z"}, status=201),
            "the registration token answer has no token",
        ),
        (
            INSTALLATION,
            lambda: web.json_response(["ghs_installation_token_0123456789"], status=201),
            "the installation token answer is not a JSON object",
        ),
        (
            RUNNER_REGISTRATION,
            lambda: web.Response(text='{"url": "https://pipelines.example/x", "tok', content_type="application/json"),
            "the runner registration answer is not a JSON object",
        ),
        (
            RUNNER_REGISTRATION,
            lambda: web.json_response({"url": "https://pipelines.example/x"}),
            "the runner registration answer has no token",
        ),
        (
            RUNNER_REGISTRATION,
            lambda: web.json_response({"url": "https://pipelines.example/x", "token": NOT_A_JWT}),
            "the admin token in the runner registration answer is not a JWT with an exp claim",
        ),
    ],
    ids=[
        "registration-token-a-proxy-page",
        "registration-token-no-token",
        "installation-token-an-array",
        "runner-registration-truncated",
        "runner-registration-no-token",
        "runner-registration-admin-token-not-a-jwt",
    ],
)
async def test_an_accepted_authentication_step_whose_answer_cannot_be_used_is_retried_later_never_fatal(
    step_path: str, odd: Odd, said: str
) -> None:
    """A proxy's page, a truncated body or an answer without its token is no refusal by GitHub: the listener
    must ask again after its backoff rather than exit, as it does on a FatalError."""

    async def answer(request: web.Request) -> web.StreamResponse:
        return odd() if request.path == step_path else good_answer(request.path, base)

    credentials = app_credentials() if step_path == INSTALLATION else PersonalAccessToken(PAT)
    async with serving(answer) as (base, seen), client(base, credentials) as actions:
        with pytest.raises(TransientError) as caught:
            await actions.get_runner_group_by_name("Default")
    error = caught.value
    assert not isinstance(error, FatalError)
    assert is_transient(error)
    assert error.url.endswith(step_path)
    assert error.status in (200, 201)
    assert f"{said}: is githubConfigUrl {base}/org a GitHub URL?" in str(error)
    assert "\n" not in str(error)
    for secret in ("Sign in", "7f3a", NOT_A_JWT, "ghs_installation_token", "AREGISTRATIONTOKEN", PAT):
        assert secret not in str(error)
    assert seen[-1] == step_path, "nothing was asked after the unusable answer"


@pytest.mark.parametrize("credentials", ["pat", "app"])
async def test_a_config_url_naming_a_server_that_answers_every_request_with_a_web_page_asks_about_the_config_url(
    credentials: str,
) -> None:
    """Not GitHub at all, but 200 to everything: retried with backoff and reported, with a hint at what to fix."""

    async def web_page(_: web.Request) -> web.StreamResponse:
        return web.Response(text="<html><body>Welcome to nginx!</body></html>", content_type="text/html")

    chosen = app_credentials() if credentials == "app" else PersonalAccessToken(PAT)
    async with serving(web_page) as (base, seen), client(base, chosen) as actions:
        with pytest.raises(TransientError) as caught:
            await actions.get_runner_group_by_name("Default")
    step = "installation token" if credentials == "app" else "registration token"
    assert f"the {step} answer is not a JSON object: is githubConfigUrl {base}/org a GitHub URL?" in str(caught.value)
    assert 'status="200 OK"' in str(caught.value)
    assert "nginx" not in str(caught.value)
    assert len(seen) == 1


@pytest.mark.parametrize(("credentials", "failing"), [("pat", REGISTRATION), ("app", INSTALLATION)])
async def test_callers_waiting_on_a_refresh_that_fails_share_its_failure_and_one_request(
    credentials: str, failing: str
) -> None:
    """Five calls arrive while the admin token is fetched and GitHub fails: one request, five errors. A call
    made after that failure was delivered asks GitHub again."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path != failing:
            return good_answer(request.path, base)
        arrived.set()
        await release.wait()
        return web.json_response({"message": "Server Error"}, status=502)

    chosen = app_credentials() if credentials == "app" else PersonalAccessToken(PAT)
    async with serving(answer) as (base, seen), client(base, chosen) as actions:
        callers = [asyncio.create_task(actions.admin_connection()) for _ in range(5)]
        await arrived.wait()  # the first caller's request is at GitHub; the others wait for its refresh
        release.set()
        outcomes = await asyncio.gather(*callers, return_exceptions=True)
        assert all(isinstance(outcome, TransientError) for outcome in outcomes), outcomes
        assert seen.count(failing) == 1

        with pytest.raises(TransientError):
            await actions.admin_connection()
        assert seen.count(failing) == 2


async def test_a_refresh_abandoned_by_its_caller_is_no_failure_for_the_callers_waiting_for_it() -> None:
    """The first caller gives up (its deadline, shutdown) while its request is at GitHub: the next one refreshes
    itself instead of inheriting a cancellation."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == REGISTRATION and not arrived.is_set():
            arrived.set()
            await release.wait()
        return good_answer(request.path, base)

    async with serving(answer) as (base, seen), client(base, PersonalAccessToken(PAT)) as actions:
        first = asyncio.create_task(actions.admin_connection())
        waiting = asyncio.create_task(actions.admin_connection())
        await arrived.wait()
        first.cancel()
        try:
            connection = await waiting
        finally:
            release.set()  # else the server's shutdown waits for the held answer
    assert first.cancelled()
    assert connection.url == f"{base}/tenant/"
    assert seen.count(REGISTRATION) == 2

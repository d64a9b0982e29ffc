"""The client pool: one client per (config URL, namespace, credentials, CA, proxy), keys free of secrets, and no
client left open with credentials nobody asks for any more."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.clock import FakeClock
from arc_scaleset.github import (
    ActionsClient,
    ActionsClientPool,
    GitHubConfig,
    InvalidCredentials,
    PersonalAccessToken,
    ProxySettings,
    SystemInfo,
    fingerprint_of_fields,
    parse_config_url,
)
from arc_scaleset.github.pool import DEFAULT_RETIRE_GRACE

SECRET = "ghp_pool_SECRET_token_value"
CONFIG = parse_config_url("https://github.com/org")
OTHER_CONFIG = parse_config_url("https://github.com/other-org")


class RecordingClient(ActionsClient):
    """A real client that remembers whether it was closed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()


def recording_pool(clock: FakeClock) -> ActionsClientPool:
    return ActionsClientPool(system_info=SystemInfo(subsystem="controller"), clock=clock, factory=RecordingClient)


async def get(
    pool: ActionsClientPool,
    token: str,
    *,
    source: str,
    namespace: str = "ns",
    config: GitHubConfig = CONFIG,
    proxy: ProxySettings | None = None,
) -> ActionsClient:
    return await pool.get(
        config, namespace=namespace, credentials=PersonalAccessToken(token), proxy=proxy, source=source
    )


def closed(client: ActionsClient) -> bool:
    assert isinstance(client, RecordingClient)
    return client.closed


async def test_same_inputs_share_a_client_and_changed_credentials_get_a_new_one() -> None:
    pool = ActionsClientPool(system_info=SystemInfo(subsystem="controller"))
    try:
        first = await get(pool, SECRET, source="a")
        again = await get(pool, SECRET, source="a")
        other_secret = await get(pool, SECRET + "2", source="b")
        other_ns = await get(pool, SECRET, source="a", namespace="other")
        assert first is again
        assert len({id(first), id(other_secret), id(other_ns)}) == 3
        assert len(pool) == 3
    finally:
        await pool.aclose()
    assert len(pool) == 0


async def test_a_rotated_secret_evicts_and_then_closes_the_client_with_the_old_credentials() -> None:
    clock = FakeClock()
    pool = recording_pool(clock)
    try:
        old = await get(pool, SECRET, source="gh-secret")
        new = await get(pool, SECRET + "2", source="gh-secret")
        assert new is not old
        assert len(pool) == 1  # the old client is no longer handed out...
        assert not closed(old)  # ...but a request already under way on it may finish

        await clock.advance(DEFAULT_RETIRE_GRACE)
        assert await get(pool, SECRET + "2", source="gh-secret") is new
        assert closed(old)
    finally:
        await pool.aclose()


async def test_a_client_still_given_by_another_secret_with_the_same_credentials_is_kept() -> None:
    clock = FakeClock()
    pool = recording_pool(clock)
    try:
        shared = await get(pool, SECRET, source="first")
        assert await get(pool, SECRET, source="second") is shared
        await get(pool, SECRET + "2", source="first")
        await clock.advance(DEFAULT_RETIRE_GRACE)
        assert await get(pool, SECRET, source="second") is shared
        assert not closed(shared)
    finally:
        await pool.aclose()


async def test_scale_sets_with_different_proxies_on_one_secret_do_not_evict_each_other() -> None:
    clock = FakeClock()
    pool = recording_pool(clock)
    proxied = ProxySettings(https_proxy="http://proxy:3128")
    try:
        direct = await get(pool, SECRET, source="s|no proxy")
        via_proxy = await get(pool, SECRET, source="s|proxy", proxy=proxied)
        for _ in range(3):
            assert await get(pool, SECRET, source="s|no proxy") is direct
            assert await get(pool, SECRET, source="s|proxy", proxy=proxied) is via_proxy
        assert len(pool) == 2
    finally:
        await pool.aclose()


async def test_a_deleted_scale_set_has_its_clients_evicted_and_closed_and_other_config_urls_keep_theirs() -> None:
    clock = FakeClock()
    pool = recording_pool(clock)
    try:
        deleted = await get(pool, SECRET, source="s")
        other = await get(pool, SECRET, source="s", config=OTHER_CONFIG)

        await pool.scale_set_deleted(namespace="ns", config_url="https://github.com/org/")
        assert len(pool) == 1
        await clock.advance(DEFAULT_RETIRE_GRACE)
        await pool.scale_set_deleted(namespace="elsewhere", config_url="https://github.com/org")

        assert closed(deleted)
        assert not closed(other)
        assert await get(pool, SECRET, source="s") is not deleted
    finally:
        await pool.aclose()


async def test_closing_the_pool_closes_evicted_clients_too() -> None:
    pool = recording_pool(FakeClock())
    old = await get(pool, SECRET, source="s")
    new = await get(pool, SECRET + "2", source="s")
    await pool.aclose()
    assert closed(old)
    assert closed(new)


def test_keys_hold_digests_not_secrets() -> None:
    key = ActionsClientPool.key_for(
        CONFIG,
        namespace="ns",
        credentials=PersonalAccessToken(SECRET),
        root_ca_pem="-----BEGIN CERTIFICATE-----",
        proxy=ProxySettings(https_proxy="http://u:SECRETPW@proxy:1"),
    )
    assert "SECRET" not in repr(key)
    assert key != ActionsClientPool.key_for(CONFIG, namespace="ns", credentials=PersonalAccessToken(SECRET))


async def test_credentials_given_as_a_function_are_built_only_for_a_new_client() -> None:
    """A caller with only the Secret's fields (a GitHub App's key not parsed yet) finds the pooled client by
    fingerprint; the credentials are built once, when the client is."""
    pool = recording_pool(FakeClock())
    builds: list[str] = []

    def build(token: str) -> PersonalAccessToken:
        builds.append(token)
        return PersonalAccessToken(token)

    fields = AppConfig(github_token=SECRET)
    fingerprint = fingerprint_of_fields(fields)
    clients = [
        await pool.get(CONFIG, namespace="ns", credentials=lambda: build(SECRET), fingerprint=fingerprint, source="s")
        for _ in range(5)
    ]
    assert builds == [SECRET]
    assert all(client is clients[0] for client in clients)
    # The same client as for the built credentials: the fingerprint of the fields is theirs.
    assert await get(pool, SECRET, source="s") is clients[0]
    await pool.aclose()


async def test_credentials_that_fail_to_build_leave_the_pooled_client_in_place() -> None:
    pool = recording_pool(FakeClock())
    old = await get(pool, SECRET, source="s")

    def refuse() -> PersonalAccessToken:
        raise InvalidCredentials("github_app_private_key could not be parsed")

    with pytest.raises(InvalidCredentials):
        await pool.get(CONFIG, namespace="ns", credentials=refuse, fingerprint="another", source="s")
    assert await get(pool, SECRET, source="s") is old
    assert not closed(old)
    await pool.aclose()

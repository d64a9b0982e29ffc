"""The client pool: one client per (config URL, namespace, credentials, CA, proxy), keys free of secrets."""

from __future__ import annotations

from arc_scaleset.github import ActionsClientPool, PersonalAccessToken, ProxySettings, SystemInfo, parse_config_url

SECRET = "ghp_pool_SECRET_token_value"
CONFIG = parse_config_url("https://github.com/org")


async def test_same_inputs_share_a_client_and_changed_credentials_get_a_new_one() -> None:
    pool = ActionsClientPool(system_info=SystemInfo(subsystem="controller"))
    try:
        first = await pool.get(CONFIG, namespace="ns", credentials=PersonalAccessToken(SECRET))
        again = await pool.get(CONFIG, namespace="ns", credentials=PersonalAccessToken(SECRET))
        rotated = await pool.get(CONFIG, namespace="ns", credentials=PersonalAccessToken(SECRET + "2"))
        other_ns = await pool.get(CONFIG, namespace="other", credentials=PersonalAccessToken(SECRET))
        assert first is again
        assert len({id(first), id(rotated), id(other_ns)}) == 3
        await pool.discard(namespace="ns")
        assert len(pool) == 1
    finally:
        await pool.aclose()
    assert len(pool) == 0


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

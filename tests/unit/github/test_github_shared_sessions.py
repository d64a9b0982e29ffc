"""Connection pools shared by the GitHub clients of one process (a shared listener's members)."""

from __future__ import annotations

from arc_scaleset.github import ActionsClient, PersonalAccessToken, SharedSessions, SystemInfo, TransportOptions
from arc_scaleset.github._transport import HttpTransport
from arc_scaleset.github.config_url import parse_config_url
from arc_scaleset_lab.sim.tls import make_server_tls


def transport(shared: SharedSessions, root_ca_pem: str | None = None) -> HttpTransport:
    return HttpTransport(TransportOptions(root_ca_pem=root_ca_pem, request_timeout=5.0), shared=shared)


async def test_clients_with_equal_transport_options_share_one_session() -> None:
    shared = SharedSessions()
    try:
        first, second = transport(shared), transport(shared)
        assert first._client_session() is second._client_session()
        assert len(shared) == 1
    finally:
        await shared.aclose()


async def test_a_client_with_another_root_ca_gets_a_session_of_its_own_and_equal_cas_share_theirs() -> None:
    _, ca_pem = make_server_tls("127.0.0.1")
    shared = SharedSessions()
    try:
        plain = transport(shared)._client_session()
        with_ca = transport(shared, ca_pem)._client_session()
        assert with_ca is not plain
        assert transport(shared, ca_pem)._client_session() is with_ca
        assert len(shared) == 2
    finally:
        await shared.aclose()


async def test_a_shared_session_keeps_no_cookies() -> None:
    shared = SharedSessions()
    try:
        jar = transport(shared)._client_session().cookie_jar
        jar.update_cookies({"session": "one-clients-cookie"})
        assert len(jar) == 0
    finally:
        await shared.aclose()


async def test_closing_a_client_leaves_the_shared_session_open_for_the_others_and_closing_the_pools_closes_it() -> None:
    shared = SharedSessions()
    client = ActionsClient(
        parse_config_url("https://github.com/octo-org"),
        PersonalAccessToken("ghp_unit_test_token_0123456789"),
        system_info=SystemInfo(subsystem="test"),
        shared_sessions=shared,
    )
    session = shared.session(True)
    await client.aclose()
    assert not session.closed
    await shared.aclose()
    assert session.closed
    assert len(shared) == 0

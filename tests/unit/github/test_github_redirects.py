"""Which request a redirect leads to (Go's rules, which ARC's client follows), and what it may carry."""

from __future__ import annotations

import pytest

from arc_scaleset.github import FatalError
from arc_scaleset.github._redirects import next_hop
from arc_scaleset.github._response import Response

HEADERS = {"Authorization": "Bearer ghp_x", "Content-Type": "application/json", "Accept": "application/json"}


def redirect(
    status: int, location: str | None, *, method: str = "POST", url: str = "https://api.example/a/b"
) -> Response:
    headers = {"Location": location} if location is not None else {}
    return Response(method=method, url=url, status=status, reason="", headers=headers, body=b"")


@pytest.mark.parametrize("status", [307, 308])
def test_a_temporary_or_permanent_redirect_repeats_the_request_with_its_body(status: int) -> None:
    hop = next_hop(redirect(status, "/c"), headers=HEADERS, body=b"{}")
    assert hop is not None
    assert (hop.method, hop.url, hop.body, dict(hop.headers)) == ("POST", "https://api.example/c", b"{}", HEADERS)


@pytest.mark.parametrize("status", [301, 302, 303])
def test_moved_found_and_see_other_turn_a_post_into_a_get_without_a_body(status: int) -> None:
    hop = next_hop(redirect(status, "https://api.example/c?x=1"), headers=HEADERS, body=b"{}")
    assert hop is not None
    assert (hop.method, hop.url, hop.body) == ("GET", "https://api.example/c?x=1", None)
    assert dict(hop.headers) == {"Authorization": "Bearer ghp_x", "Accept": "application/json"}


def test_the_same_host_or_a_subdomain_gets_the_credentials_and_another_host_does_not() -> None:
    def authorization(location: str) -> str | None:
        hop = next_hop(redirect(307, location), headers=HEADERS, body=None)
        assert hop is not None
        return hop.headers.get("Authorization")

    assert authorization("https://uploads.api.example/c") == "Bearer ghp_x"
    assert authorization("https://api.example.evil/c") is None
    assert authorization("https://example/c") is None
    assert authorization("https://api.example:8443/c") == "Bearer ghp_x", "Go ignores the port"


def test_a_redirect_from_https_to_http_is_refused_rather_than_sending_the_token_in_cleartext() -> None:
    with pytest.raises(FatalError, match="refusing to send credentials in cleartext") as caught:
        next_hop(redirect(307, "http://api.example/c"), headers=HEADERS, body=None)
    assert "ghp_x" not in str(caught.value)


def test_a_redirect_without_a_location_or_any_other_answer_is_the_answer() -> None:
    assert next_hop(redirect(307, None), headers=HEADERS, body=None) is None
    assert next_hop(redirect(304, "/c", method="GET"), headers=HEADERS, body=None) is None
    assert next_hop(redirect(200, "/c"), headers=HEADERS, body=None) is None


@pytest.mark.parametrize(
    "location",
    ["http://[invalid", "mailto:ops@example.com", "https://:8443/x", "https://user:hunter2@api.example/x"],
    ids=["not a URL", "another scheme", "no host", "user information"],
)
def test_a_location_that_cannot_be_followed_is_a_clear_error_never_a_crash(location: str) -> None:
    with pytest.raises(FatalError, match="redirected to") as caught:
        next_hop(redirect(307, location), headers=HEADERS, body=None)
    assert "hunter2" not in str(caught.value)

"""Which request a redirect leads to (Go's method rules, which ARC's client follows), where it may lead, and what
it may carry: always judged against the original request (docs/github.md "Transport and errors")."""

from __future__ import annotations

import ipaddress

import pytest

from arc_scaleset.github import FatalError
from arc_scaleset.github._redirects import AddressKind, Hop, address_kind, address_refusal, next_hop
from arc_scaleset.github._response import Response

HEADERS = {"Authorization": "Bearer ghp_x", "Content-Type": "application/json", "Accept": "application/json"}
ORIGINAL = "https://api.example/a/b"


def redirect(status: int, location: str | None, *, method: str = "POST", url: str = ORIGINAL) -> Response:
    headers = {"Location": location} if location is not None else {}
    return Response(method=method, url=url, status=status, reason="", headers=headers, body=b"")


def follow(response: Response, *, original: str = ORIGINAL, body: bytes | None = None) -> Hop | None:
    return next_hop(response, original=original, headers=HEADERS, body=body)


@pytest.mark.parametrize("status", [307, 308])
def test_a_temporary_or_permanent_redirect_repeats_the_request_with_its_body(status: int) -> None:
    hop = next_hop(redirect(status, "/c"), original=ORIGINAL, headers=HEADERS, body=b"{}")
    assert hop is not None
    assert (hop.method, hop.url, hop.body, dict(hop.headers)) == ("POST", "https://api.example/c", b"{}", HEADERS)
    assert hop.resolve is None, "the original host itself: nothing to look up"


@pytest.mark.parametrize("status", [301, 302, 303])
def test_moved_found_and_see_other_turn_a_post_into_a_get_without_a_body(status: int) -> None:
    hop = next_hop(redirect(status, "https://api.example/c?x=1"), original=ORIGINAL, headers=HEADERS, body=b"{}")
    assert hop is not None
    assert (hop.method, hop.url, hop.body) == ("GET", "https://api.example/c?x=1", None)
    assert dict(hop.headers) == {"Authorization": "Bearer ghp_x", "Accept": "application/json"}


def test_only_the_same_host_and_port_get_the_credentials() -> None:
    def authorization(location: str) -> str | None:
        hop = next_hop(redirect(307, location), original=ORIGINAL, headers=HEADERS, body=None)
        assert hop is not None
        return hop.headers.get("Authorization")

    assert authorization("https://api.example/c") == "Bearer ghp_x"
    assert authorization("https://api.example:443/c") == "Bearer ghp_x", "the scheme's default port is that port"
    assert authorization("https://api.example:8443/c") is None, "another port is another service"
    assert authorization("https://uploads.api.example/c") is None, "a subdomain is followed, without credentials"


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/role",
        "https://api.example.evil/c",
        "https://example/c",
        "https://localhost/c",
        "https://127.0.0.1/c",
        "https://[::1]/c",
    ],
)
def test_a_redirect_to_another_host_is_refused_whatever_it_names(location: str) -> None:
    with pytest.raises(FatalError, match="redirected to another host") as caught:
        follow(redirect(303, location, url="http://ghes.example/api/v3/x"), original="http://ghes.example/api/v3/x")
    assert "security-credentials" not in str(caught.value), "the location's path is never named"


def test_a_location_whose_host_is_not_ascii_is_refused_not_raised_as_a_unicode_error() -> None:
    with pytest.raises(FatalError, match="redirected to a location that is not a URL"):
        follow(redirect(307, "https://b\u00fccher.api.example/c"))


def test_the_rule_holds_against_the_original_request_not_the_previous_hop() -> None:
    """A chain cannot walk away a step at a time: from a subdomain hop, its own subdomain's parent is no base."""
    hop = follow(redirect(307, "https://api.example/c", url="https://x.api.example/b"))
    assert hop is not None
    with pytest.raises(FatalError, match=r"only api\.example and its subdomains"):
        follow(redirect(307, "https://example/c", url="https://x.api.example/b"))


def test_an_address_literal_original_is_followed_only_to_itself() -> None:
    original = "http://127.0.0.1:8080/api/v3/x"
    hop = follow(redirect(307, "http://127.0.0.1:9090/y", url=original), original=original)
    assert hop is not None
    assert hop.headers.get("Authorization") is None
    assert hop.resolve is None
    with pytest.raises(FatalError, match="another host"):
        follow(redirect(307, "http://127.0.0.2/y", url=original), original=original)


def test_a_subdomain_is_named_for_the_transport_to_look_up() -> None:
    hop = follow(redirect(307, "https://Meta.API.example./c"))
    assert hop is not None
    assert hop.resolve == "meta.api.example.", "the name the connection would look up: absolute, as written"


def test_a_redirect_from_https_to_http_is_refused_rather_than_sending_the_token_in_cleartext() -> None:
    with pytest.raises(FatalError, match="refusing to send credentials in cleartext") as caught:
        follow(redirect(307, "http://api.example/c"))
    assert "ghp_x" not in str(caught.value)


def test_a_redirect_without_a_location_or_any_other_answer_is_the_answer() -> None:
    assert follow(redirect(307, None)) is None
    assert follow(redirect(304, "/c", method="GET")) is None
    assert follow(redirect(200, "/c")) is None


@pytest.mark.parametrize(
    "location",
    [
        "http://[invalid",
        "mailto:ops@example.com",
        "https://:8443/x",
        "https://user:hunter2@api.example/x",
        "https://:hunter2@api.example/x",
    ],
    ids=["not a URL", "another scheme", "no host", "user information", "a password without a user"],
)
def test_a_location_that_cannot_be_followed_is_a_clear_error_never_a_crash(location: str) -> None:
    with pytest.raises(FatalError, match="redirected to") as caught:
        follow(redirect(307, location))
    assert "hunter2" not in str(caught.value)


def ips(*addresses: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    return [ipaddress.ip_address(address) for address in addresses]


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("140.82.112.6", AddressKind.PUBLIC),
        ("127.0.0.1", AddressKind.LOOPBACK),
        ("::1", AddressKind.LOOPBACK),
        ("169.254.169.254", AddressKind.LINK_LOCAL),
        ("fe80::1", AddressKind.LINK_LOCAL),
        ("::ffff:169.254.169.254", AddressKind.LINK_LOCAL),
        ("10.0.0.5", AddressKind.PRIVATE),
        ("fd00:ec2::254", AddressKind.PRIVATE),
        ("0.0.0.0", AddressKind.PRIVATE),
        # The shared address space (RFC 6598): not "private" to Python, but pod and service ranges (EKS custom
        # networking, GKE's non-RFC 1918 ranges) live there, so it leads into the cluster all the same.
        ("100.64.0.10", AddressKind.PRIVATE),
        ("100.127.255.254", AddressKind.PRIVATE),
        ("::ffff:100.64.0.10", AddressKind.PRIVATE),
        ("100.128.0.1", AddressKind.PUBLIC),
        # 6to4 and NAT64 addresses go where the IPv4 address they carry is: Python calls the first global and
        # the second reserved whatever they carry (an IPv6-only cluster's DNS64 gives GitHub 64:ff9b::/96 ones).
        ("2002:a00:1::", AddressKind.PRIVATE),
        ("2002:a9fe:a9fe::1", AddressKind.LINK_LOCAL),
        ("2002:7f00:1::", AddressKind.LOOPBACK),
        ("2002:8c52:7006::", AddressKind.PUBLIC),
        ("64:ff9b::10.0.0.5", AddressKind.PRIVATE),
        ("64:ff9b::169.254.169.254", AddressKind.LINK_LOCAL),
        ("64:ff9b::140.82.112.6", AddressKind.PUBLIC),
        ("64:ff9b:1::a00:5", AddressKind.PRIVATE),  # a local-use NAT64 prefix (RFC 8215): never public
    ],
)
def test_addresses_are_sorted_into_public_loopback_link_local_and_private(address: str, kind: AddressKind) -> None:
    assert address_kind(ipaddress.ip_address(address)) is kind


def test_a_subdomain_may_resolve_only_to_public_addresses_or_to_the_kind_of_the_original_host() -> None:
    public, ghes, sim = ips("140.82.112.6"), ips("10.0.0.5"), ips("127.0.0.1")
    assert address_refusal(original=public, target=ips("140.82.112.7")) is None
    assert address_refusal(original=ghes, target=ips("10.1.2.3")) is None, "a GHES on a private network"
    assert address_refusal(original=sim, target=ips("127.0.0.1")) is None, "the lab's sim on loopback"
    assert "link-local" in (address_refusal(original=public, target=ips("169.254.169.254")) or "")
    assert "link-local" in (address_refusal(original=ghes, target=ips("169.254.169.254")) or "")
    assert "loopback" in (address_refusal(original=public, target=ips("140.82.112.7", "127.0.0.1")) or "")
    assert "private" in (address_refusal(original=public, target=ips("10.0.0.5")) or "")

"""Proxy selection with Go httpproxy semantics, and proxy credentials kept out of reprs."""

from __future__ import annotations

import base64

import pytest

from arc_scaleset.github.proxy import ProxySettings


def test_from_env_prefers_upper_case_and_reads_all_three() -> None:
    settings = ProxySettings.from_env(
        {"HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128", "http_proxy": "p:80", "no_proxy": "x"}
    )
    assert (settings.https_proxy, settings.http_proxy, settings.no_proxy) == ("http://upper:3128", "p:80", "x")


def test_the_request_scheme_picks_the_proxy_and_a_bare_host_means_http() -> None:
    settings = ProxySettings(http_proxy="plain:8080", https_proxy="https://secure:8443")
    http_choice = settings.proxy_for("http://github.example/org")
    https_choice = settings.proxy_for("https://github.example/org")
    assert http_choice is not None
    assert https_choice is not None
    assert (http_choice.url, https_choice.url) == ("http://plain:8080", "https://secure:8443")


def test_proxy_credentials_become_basic_auth_and_are_masked() -> None:
    settings = ProxySettings(https_proxy="http://user:p%40ss-SECRET@proxy:3128")
    choice = settings.proxy_for("https://api.github.com/x")
    assert choice is not None
    assert choice.url == "http://proxy:3128"
    assert choice.headers == {"Proxy-Authorization": "Basic " + base64.b64encode(b"user:p@ss-SECRET").decode()}
    assert "SECRET" not in repr(settings)
    assert "SECRET" not in repr(choice)


@pytest.mark.parametrize(
    ("no_proxy", "url", "proxied"),
    [
        ("", "https://api.github.com/x", True),
        ("*", "https://api.github.com/x", False),
        ("github.com", "https://github.com/x", False),
        ("github.com", "https://api.github.com/x", False),
        ("github.com", "https://notgithub.com/x", True),
        (".github.com", "https://github.com/x", True),
        (".github.com", "https://api.github.com/x", False),
        ("*.github.com", "https://github.com/x", True),
        ("*.github.com", "https://api.github.com/x", False),
        ("ghes.local:8443", "https://ghes.local:8443/x", False),
        ("ghes.local:8443", "https://ghes.local/x", True),
        ("10.0.0.0/8", "https://10.1.2.3/x", False),
        ("10.0.0.0/8", "https://11.1.2.3/x", True),
        ("192.168.1.5", "https://192.168.1.5:9000/x", False),
        (" a.example , GitHub.com ", "https://github.com/x", False),
        ("", "https://localhost:8080/x", False),
        ("", "https://127.0.0.1/x", False),
        ("", "https://[::1]:443/x", False),
    ],
)
def test_no_proxy_and_loopback_bypass_the_proxy(no_proxy: str, url: str, proxied: bool) -> None:
    settings = ProxySettings(https_proxy="http://proxy:3128", no_proxy=no_proxy)
    assert (settings.proxy_for(url) is not None) is proxied


def test_cgi_ignores_http_proxy_but_not_https_proxy() -> None:
    settings = ProxySettings.from_env({"HTTP_PROXY": "p:1", "HTTPS_PROXY": "p:2", "REQUEST_METHOD": "GET"})
    assert settings.proxy_for("http://h/x") is None
    assert settings.proxy_for("https://h/x") is not None

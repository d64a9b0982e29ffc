"""Credentials objects from the fields the credential rule chose (the rule itself:
tests/unit/api/test_api_credentials.py): errors that never quote a secret, masked reprs, App JWT claims."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.clock import FakeClock
from arc_scaleset.github._auth import _skew_cause
from arc_scaleset.github.credentials import (
    GitHubApp,
    InvalidCredentials,
    PersonalAccessToken,
    credentials_from_fields,
    fingerprint_of_fields,
)

SECRET_TOKEN = "ghp_SUPERSECRETTOKENVALUE123"


def test_a_token_gives_a_personal_access_token() -> None:
    assert credentials_from_fields(AppConfig(github_token=SECRET_TOKEN)) == PersonalAccessToken(SECRET_TOKEN)


def test_app_fields_give_a_github_app_whose_id_may_be_a_client_id(rsa_pem: str) -> None:
    for app_id in ("123", "Iv1.abc"):
        creds = credentials_from_fields(
            AppConfig(github_app_id=app_id, github_app_installation_id=456, github_app_private_key=rsa_pem)
        )
        assert isinstance(creds, GitHubApp)
        assert (creds.app_id, creds.installation_id) == (app_id, 456)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # Not chosen by the credential rule: refused rather than decided a second time here.
        (AppConfig(), "no credentials given"),
        (AppConfig(github_token=SECRET_TOKEN, github_app_id="1"), "apply the credential rule first"),
        (
            AppConfig(github_app_id="1", github_app_installation_id=0, github_app_private_key="-----BEGIN x"),
            "github_app_installation_id must be a positive integer",
        ),
        (
            AppConfig(github_app_id="1", github_app_installation_id=2, github_app_private_key=SECRET_TOKEN),
            "github_app_private_key is not PEM-encoded",
        ),
        (
            AppConfig(
                github_app_id="1",
                github_app_installation_id=2,
                github_app_private_key=f"-----BEGIN RSA PRIVATE KEY-----\n{SECRET_TOKEN}\n-----END RSA PRIVATE KEY",
            ),
            "github_app_private_key could not be parsed",
        ),
    ],
)
def test_unusable_fields_get_a_clear_error_without_the_secret(fields: AppConfig, expected: str) -> None:
    with pytest.raises(InvalidCredentials) as caught:
        credentials_from_fields(fields)
    message = str(caught.value)
    assert expected in message
    assert SECRET_TOKEN not in message
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ or caught.value.__context__ is None


def test_a_non_rsa_key_is_rejected(ec_pem: str) -> None:
    with pytest.raises(InvalidCredentials, match="not an RSA key"):
        GitHubApp("1", 2, ec_pem)


def test_reprs_and_strs_hide_secrets(rsa_pem: str) -> None:
    pat = PersonalAccessToken(SECRET_TOKEN)
    app = GitHubApp("1", 2, rsa_pem)
    for text in (repr(pat), str(pat), repr(app), str(app), repr([pat, app])):
        assert SECRET_TOKEN not in text
        assert "PRIVATE KEY" not in text
        assert rsa_pem[40:80] not in text


def test_fingerprints_identify_without_revealing(rsa_pem: str) -> None:
    assert PersonalAccessToken("a" * 10).fingerprint() == PersonalAccessToken("a" * 10).fingerprint()
    assert PersonalAccessToken("a" * 10).fingerprint() != PersonalAccessToken("b" * 10).fingerprint()
    assert GitHubApp("1", 2, rsa_pem).fingerprint() != GitHubApp("1", 3, rsa_pem).fingerprint()
    assert SECRET_TOKEN not in PersonalAccessToken(SECRET_TOKEN).fingerprint()
    assert len(PersonalAccessToken(SECRET_TOKEN).fingerprint()) == 64


@pytest.mark.parametrize("key_format", ["PKCS#1", "PKCS#8"])
def test_app_jwt_verifies_as_rs256_with_backdated_short_lived_claims(
    key_format: str, rsa_pem: str, rsa_pkcs8_pem: str, rsa_private_key: rsa.RSAPrivateKey
) -> None:
    clock = FakeClock(start=dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC))
    pem = rsa_pem if key_format == "PKCS#1" else rsa_pkcs8_pem
    token = GitHubApp("Iv1.abc", 2, pem).jwt(now=clock.now())
    claims = jwt.decode(
        token, rsa_private_key.public_key(), algorithms=["RS256"], options={"verify_exp": False, "verify_iat": False}
    )
    now = int(clock.now().timestamp())
    assert claims == {"iat": now - 60, "exp": now - 60 + 540, "iss": "Iv1.abc"}
    assert jwt.get_unverified_header(token) == {"alg": "RS256", "typ": "JWT"}
    assert "=" not in token  # base64url without padding, as RFC 7519 requires


def test_an_app_signs_its_jwt_without_loading_pyjwt_or_cryptography(rsa_pem: str) -> None:
    # A fresh interpreter, as a listener pod: those two would add about 9 MB to it (docs/github.md).
    code = f"""
import datetime as dt, sys
import arc_scaleset.listener.command
from arc_scaleset.github.credentials import GitHubApp
GitHubApp("1", 2, {rsa_pem!r}).jwt(now=dt.datetime.now(dt.UTC))
print(" ".join(name for name in ("jwt", "cryptography") if name in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)

    assert done.stdout.split() == []


def test_unusable_keys_are_refused_with_a_clear_error_that_never_quotes_the_key(
    rsa_pem: str, encrypted_rsa_pem: str, ec_pem: str, damaged_rsa_pem: str
) -> None:
    unreadable = "github_app_private_key could not be parsed as an unencrypted PEM private key"
    cases = {
        "encrypted": (encrypted_rsa_pem, unreadable),
        "truncated": (rsa_pem[: len(rsa_pem) // 2], unreadable),
        "garbage": ("-----BEGIN PRIVATE KEY-----\n" + "A" * 64 + "\n-----END PRIVATE KEY-----\n", unreadable),
        "damaged (parts that do not belong together)": (damaged_rsa_pem, unreadable),
        "EC": (ec_pem, "github_app_private_key is not an RSA key (GitHub App keys are RSA)"),
    }
    for case, (pem, expected) in cases.items():
        with pytest.raises(InvalidCredentials) as caught:
            GitHubApp("1", 2, pem)
        message = str(caught.value)
        assert message == expected, case
        body = "".join(pem.splitlines()[1:-1])
        assert body[:40] not in message, case
        assert "PRIVATE KEY" not in message, case
        assert caught.value.__cause__ is None, case
        assert caught.value.__suppress_context__, case


def test_the_fingerprint_of_fields_is_that_of_their_credentials_without_parsing_the_key(rsa_pem: str) -> None:
    app = AppConfig(github_app_id="123", github_app_installation_id=456, github_app_private_key=rsa_pem)
    token = AppConfig(github_token=SECRET_TOKEN)
    assert fingerprint_of_fields(app) == credentials_from_fields(app).fingerprint()
    assert fingerprint_of_fields(token) == credentials_from_fields(token).fingerprint()
    # Not parsed: a key that would be refused still has a fingerprint (it is refused when the client is built).
    broken = AppConfig(github_app_id="123", github_app_installation_id=456, github_app_private_key="-----BEGIN x")
    assert fingerprint_of_fields(broken) != fingerprint_of_fields(app)


@pytest.mark.parametrize(
    ("skew", "corrected", "cause"),
    [
        (None, 0, "wrong App ID or private key"),
        (5, 0, "wrong App ID or private key"),
        (-300, 0, "this machine's clock is 300 s ahead of GitHub's (its Date header)"),
        (600, 0, "this machine's clock is 600 s behind GitHub's (its Date header)"),
        (-300, -300, "the JWT was dated by GitHub's clock, as this machine's is 300 s ahead of it"),
    ],
)
def test_a_refused_app_jwt_names_the_clock_when_the_clocks_say_it_is_the_cause(
    skew: int | None, corrected: int, cause: str
) -> None:
    measured = None if skew is None else dt.timedelta(seconds=skew)
    assert cause in _skew_cause(measured, corrected=dt.timedelta(seconds=corrected))

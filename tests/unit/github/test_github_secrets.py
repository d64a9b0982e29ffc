"""Every secret a client was given or minted stays masked out of its error texts while the secret can be valid,
and credential-shaped text is masked in every error whoever built it."""

from __future__ import annotations

import datetime as dt
import secrets

import jwt
import orjson

from arc_scaleset.clock import FakeClock
from arc_scaleset.github._secrets import EXPIRY_GRACE, JIT_CONFIG_RETENTION, Redactor, jwt_expiry
from arc_scaleset.github._transport import error_for_response
from arc_scaleset.github.errors import ActionsError, FatalError

# Shaped like no known credential, so only the client's own memory of it can mask it.
PAT = "plain-looking-pat-" + "7f3a9c2e5b8d1f4a6c0e"
URL = "https://pipelines.example/tenant/_apis/runtime/runnerscalesets/1/generatejitconfig?api-version=6.0-preview"


def error_echoing(text: str, redactor: Redactor | None = None) -> ActionsError:
    """The error for a JSON answer whose message echoes ``text`` (the only body an error quotes)."""
    return error_for_response(
        method="POST",
        url=URL,
        status=400,
        reason="Bad Request",
        headers={"Content-Type": "application/json"},
        body=orjson.dumps({"message": text}),
        now=0.0,
        scrub=redactor,
    )


def jit_config() -> str:
    return "eyJydW5uZXIiOiAi" + secrets.token_urlsafe(1000)


async def test_the_pat_is_still_masked_after_200_jit_configs_and_a_year() -> None:
    clock = FakeClock()
    redactor = Redactor(clock=clock)
    redactor.add(PAT)
    for runner_id in range(200):
        redactor.add(jit_config(), expires_at=clock.now() + JIT_CONFIG_RETENTION, tag=runner_id)
    await clock.advance(366 * 86400)
    for runner_id in range(200, 500):  # enough to prune everything that expired
        redactor.add(jit_config(), expires_at=clock.now() + JIT_CONFIG_RETENTION, tag=runner_id)

    text = str(error_echoing(f"proxy rejected the request for {PAT}", redactor))

    assert PAT not in text
    assert "[REDACTED]" in text


async def test_minted_tokens_are_masked_until_they_expire_and_then_forgotten() -> None:
    clock = FakeClock()
    redactor = Redactor(clock=clock)
    expires = clock.now() + dt.timedelta(hours=1)
    tokens = [f"minted-token-{i:04d}-{secrets.token_hex(8)}" for i in range(1000)]
    for token in tokens:
        redactor.add(token, expires_at=expires)
    assert tokens[0] not in redactor(f"echo {tokens[0]}")

    await clock.advance((dt.timedelta(hours=1) + EXPIRY_GRACE).total_seconds())
    for i in range(2000):
        redactor.add(f"later-token-{i:04d}-{secrets.token_hex(8)}", expires_at=clock.now() + dt.timedelta(hours=1))

    assert len(redactor) == 2000  # the expired thousand are gone: memory follows the live tokens only


def test_a_jit_config_is_forgotten_when_its_runner_is_removed_but_the_pat_never_is() -> None:
    clock = FakeClock()
    redactor = Redactor(clock=clock)
    redactor.add(PAT)
    redactor.add(jit_config(), expires_at=clock.now() + JIT_CONFIG_RETENTION, tag=("jit-config", 7))
    redactor.forget(("jit-config", 7))
    redactor.forget(("jit-config", 8))  # unknown: nothing happens
    assert len(redactor) == 1
    assert PAT not in redactor(PAT)


def test_a_secret_containing_another_is_masked_whole() -> None:
    redactor = Redactor()
    redactor.add("abcdef-short")
    redactor.add("abcdef-short-and-longer-secret")
    assert redactor("x abcdef-short-and-longer-secret y") == "x [REDACTED] y"


def test_a_secret_cut_by_the_detail_clip_leaves_no_part_behind() -> None:
    redactor = Redactor()
    redactor.add(PAT)
    text = str(error_echoing("x" * 490 + PAT, redactor))
    assert PAT[:8] not in text


def test_jwts_and_authorization_values_in_an_error_body_are_masked_without_being_known() -> None:
    token = jwt.encode({"exp": 2_000_000_000, "tid": 1}, "k" * 32, algorithm="HS256")
    body = f'upstream said: Authorization: token 0123456789abcdefABCDEF, queue token {token}, "Bearer {token}"'
    text = str(error_echoing(body))
    assert token not in text
    assert token.split(".")[2] not in text
    assert "0123456789abcdefABCDEF" not in text
    assert "upstream said" in text


def test_an_error_built_anywhere_masks_credential_shaped_detail() -> None:
    error = FatalError(method="GET", url=URL, detail="cannot parse message for Authorization: Basic dXNlcjpwYXNz")
    assert "dXNlcjpwYXNz" not in str(error)


def test_jwt_expiry_reads_exp_and_tolerates_anything_else() -> None:
    token = jwt.encode({"exp": 2_000_000_000}, "k" * 32, algorithm="HS256")
    assert jwt_expiry(token) == dt.datetime.fromtimestamp(2_000_000_000, tz=dt.UTC)
    assert jwt_expiry("simq_not-a-jwt") is None
    assert jwt_expiry(jwt.encode({"sub": "x"}, "k" * 32, algorithm="HS256")) is None

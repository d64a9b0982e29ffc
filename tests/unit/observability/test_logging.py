"""Logging renders text or JSON, carries bound context, and never lets a secret through."""

from __future__ import annotations

import asyncio
import io
import logging
import secrets
from collections.abc import Callable, Iterator

import orjson
import pytest
import structlog

from arc_scaleset.observability.logging import (
    REDACTED,
    RedactingFilter,
    configure_logging,
    get_logger,
    log_context,
    redact,
    register_secret,
    unregister_secret,
)

Configure = Callable[..., io.StringIO]

GITHUB_PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
INSTALLATION_TOKEN = "ghs_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"
FINE_GRAINED_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END RSA PRIVATE KEY-----"
# An Actions-service admin token's shape: header.payload.signature, base64url.
ADMIN_JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJ0aWQiOjEsImV4cCI6MjAwMDAwMDAwMH0." + "c2lnbmF0dXJlX29mX3RoZV90b2tlbg"


@pytest.fixture
def configure() -> Iterator[Configure]:
    """configure_logging into a buffer; afterwards put the root logger and structlog back as they were."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level

    def _configure(**options: str) -> io.StringIO:
        buffer = io.StringIO()
        configure_logging(stream=buffer, **options)
        return buffer

    yield _configure
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def secret() -> Iterator[str]:
    value = "s3cr3t-" + secrets.token_hex(12)
    register_secret(value)
    yield value
    unregister_secret(value)


def _log_everywhere(value: str) -> None:
    """Put ``value`` in every place a log line can carry text."""
    log = get_logger("test.redaction")
    log.info(f"event text {value}", field=value, nested={"list": [value], value: "as a key"})
    logging.getLogger("test.stdlib").warning("stdlib %s args", value, extra={"extra_field": value})
    try:
        raise RuntimeError(f"exception text {value}")
    except RuntimeError:
        log.exception("it failed")
        logging.getLogger("test.stdlib").exception("stdlib failure")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_registered_secret_never_appears_in_output(configure: Configure, secret: str, fmt: str) -> None:
    output = configure(level="debug", fmt=fmt)
    _log_everywhere(secret)
    text = output.getvalue()
    assert secret not in text
    assert text.count(REDACTED) >= 8
    for still_there in ("exception text", "stdlib", "it failed"):
        assert still_there in text


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("credential", [GITHUB_PAT, INSTALLATION_TOKEN, FINE_GRAINED_PAT, PRIVATE_KEY, ADMIN_JWT])
def test_credential_shaped_text_never_appears_even_unregistered(
    configure: Configure, fmt: str, credential: str
) -> None:
    output = configure(level="debug", fmt=fmt)
    _log_everywhere(credential)
    text = output.getvalue()
    assert credential not in text
    assert credential[12:30] not in text  # not even a tail of it
    assert REDACTED in text


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_authorization_header_values_are_masked_but_the_scheme_stays(configure: Configure, fmt: str) -> None:
    output = configure(level="debug", fmt=fmt)
    get_logger("t").debug("request", headers={"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig"})
    get_logger("t").debug("session", header="RemoteAuth abcdefgh12345678")
    text = output.getvalue()
    assert "eyJhbGciOiJSUzI1NiJ9" not in text
    assert "abcdefgh12345678" not in text
    assert f"Bearer {REDACTED}" in text
    assert f"RemoteAuth {REDACTED}" in text


def test_secret_split_by_json_escaping_is_still_masked(configure: Configure) -> None:
    tricky = 'pass"word\\with\nnewline'
    register_secret(tricky)
    try:
        output = configure(fmt="json")
        get_logger("t").info("x", value=tricky)
        record = orjson.loads(output.getvalue())
        assert record["value"] == REDACTED
    finally:
        unregister_secret(tricky)


def test_short_values_are_not_registered(configure: Configure) -> None:
    register_secret("admin")
    output = configure()
    get_logger("t").info("user admin logged in")
    assert "user admin logged in" in output.getvalue()


def test_unregistered_secret_is_no_longer_masked(configure: Configure) -> None:
    value = "rotated-" + secrets.token_hex(8)
    register_secret(value)
    unregister_secret(value)
    output = configure()
    get_logger("t").info(value)
    assert value in output.getvalue()


def test_json_lines_carry_the_standard_keys(configure: Configure) -> None:
    output = configure(level="info", fmt="json")
    get_logger("arc.test").info("scaled", replicas=3)
    record = orjson.loads(output.getvalue())
    assert record["msg"] == "scaled"
    assert record["level"] == "info"
    assert record["logger"] == "arc.test"
    assert record["replicas"] == 3
    assert record["time"].endswith("Z")


def test_text_lines_are_one_readable_line(configure: Configure) -> None:
    output = configure(level="info", fmt="text")
    get_logger("arc.test").info("scaled", replicas=3)
    (line,) = output.getvalue().splitlines()
    for part in ("scaled", "replicas=3", "[arc.test]", "info"):
        assert part in line
    assert "\x1b[" not in line  # no colour codes


def test_bound_context_appears_on_every_event_in_the_block(configure: Configure) -> None:
    output = configure(fmt="json")
    log = get_logger("reconciler")
    with log_context(key="arc-runners/set-a", namespace="arc-runners", name="set-a"):
        log.info("start")
        logging.getLogger("reconciler.stdlib").info("from stdlib")
    log.info("after")
    first, second, third = (orjson.loads(line) for line in output.getvalue().splitlines())
    for record in (first, second):
        assert (record["key"], record["namespace"], record["name"]) == ("arc-runners/set-a", "arc-runners", "set-a")
    assert "namespace" not in third


async def test_context_is_per_task(configure: Configure) -> None:
    output = configure(fmt="json")
    log = get_logger("reconciler")

    async def reconcile(name: str, go: asyncio.Event, done: asyncio.Event) -> None:
        with log_context(name=name):
            await go.wait()
            log.info("reconciled")
        done.set()

    go_a, go_b, done_a, done_b = asyncio.Event(), asyncio.Event(), asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(reconcile("a", go_a, done_a)), asyncio.create_task(reconcile("b", go_b, done_b))]
    await asyncio.sleep(0)  # both tasks bind before either logs
    go_b.set()
    await done_b.wait()
    go_a.set()
    await asyncio.gather(*tasks)
    names = [orjson.loads(line)["name"] for line in output.getvalue().splitlines()]
    assert names == ["b", "a"]


def test_level_filters_lower_events(configure: Configure) -> None:
    output = configure(level="warn")
    get_logger("t").info("hidden")
    logging.getLogger("t").info("hidden too")
    get_logger("t").warning("shown")
    assert "hidden" not in output.getvalue()
    assert "shown" in output.getvalue()


@pytest.mark.parametrize(("level", "fmt"), [("verbose", "text"), ("info", "xml")])
def test_unknown_level_or_format_is_refused(configure: Configure, level: str, fmt: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        configure(level=level, fmt=fmt)


def test_reconfiguring_replaces_the_handler(configure: Configure) -> None:
    first = configure(fmt="text")
    second = configure(fmt="json")
    get_logger("t").info("once")
    assert first.getvalue() == ""
    assert orjson.loads(second.getvalue())["msg"] == "once"


def test_redacting_filter_masks_records_for_foreign_handlers(secret: str) -> None:
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(message)s %(detail)s"))
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test.foreign")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("token %s", GITHUB_PAT, extra={"detail": f"secret={secret}"})
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    assert buffer.getvalue() == f"token {REDACTED} secret={REDACTED}\n"


def test_redact_masks_a_truncated_private_key_to_the_end() -> None:
    assert redact("key: -----BEGIN EC PRIVATE KEY-----\nMHcCAQEE") == f"key: {REDACTED}"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: token 0123456789abcdef0123", "0123456789abcdef0123"),
        ("curl -H 'Authorization: token AAAABBBBCCCC1111'", "AAAABBBBCCCC1111"),
        ("proxy echoed Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ('{"authorization": "opaque-value-without-scheme"}', "opaque-value-without-scheme"),
        ("GET /x with token sk0123456789", "sk0123456789"),
        ('{"token": "AABBCCDDEEFF11223344", "expires_at": "2030-01-01T00:00:00Z"}', "AABBCCDDEEFF11223344"),
        ("form body: password=hunter2hunter2&user=x", "hunter2hunter2"),
    ],
)
def test_token_and_authorization_forms_are_masked(text: str, secret: str) -> None:
    masked = redact(text)
    assert secret not in masked
    assert REDACTED in masked
    assert redact(masked) == masked  # masking twice changes nothing (events and conditions may see text twice)


@pytest.mark.parametrize(
    "prose",
    [
        "GitHub rejected the credentials (bad or expired token)",
        "the registration token expires soon",
        "token validation failed for the request",
        "githubConfigSecret names Secret arc/gh-secret",
    ],
)
def test_prose_about_tokens_stays_readable(prose: str) -> None:
    assert redact(prose) == prose


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("using proxy http://ops:hunter2hunter@proxy.corp:3128", f"using proxy http://ops:{REDACTED}@proxy.corp:3128"),
        ("HTTPS_PROXY=https://u:p%40ss%2Fw0rd@10.0.0.1/", f"HTTPS_PROXY=https://u:{REDACTED}@10.0.0.1/"),
        ("clone git+ssh://:pw@host/x", f"clone git+ssh://:{REDACTED}@host/x"),
        ('{"url": "socks5://me:s3cr3t@proxy"}', f'{{"url": "socks5://me:{REDACTED}@proxy"}}'),
    ],
)
def test_the_password_of_a_url_with_user_information_is_masked_and_the_user_name_kept(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected, "masking twice changes nothing"


def test_a_url_without_a_password_and_an_email_address_stay_as_they_are() -> None:
    for text in ("https://git@github.com/org/repo", "mail ops@example.com", "https://host:8443/path?x=a:b@c"):
        assert redact(text) == text

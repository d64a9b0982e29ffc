"""The one GitHub credential rule (api/credentials.py): ARC's table of combinations and its messages, applied
alike to a scale set's Secret (the controller) and to the listener's config.json (the listener)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from arc_scaleset.api.credentials import (
    BOTH_PROVIDED,
    NONE_PROVIDED,
    AppConfig,
    CredentialsError,
    app_config_from_secret_data,
)
from arc_scaleset.api.listener_config import ListenerConfig, ListenerConfigError
from tests.unit.api.listener_config_fixtures import ARC_WRITTEN_PAT_CONFIG, TOKEN
from tests.unit.api.listener_config_fixtures import PRIVATE_KEY as PEM

PRIVATE_KEY = PEM.strip()  # Secret values are stripped; the listener config holds what the controller wrote

APP = {"github_app_id": "Iv1.abc", "github_app_installation_id": "42", "github_app_private_key": PRIVATE_KEY}
TOKEN_ONLY = AppConfig(github_token=TOKEN)
APP_ONLY = AppConfig(github_app_id="Iv1.abc", github_app_installation_id=42, github_app_private_key=PRIVATE_KEY)

# (Secret data, the credentials used, or the start of the error: ARC's message).
RULE_TABLE: list[tuple[str, dict[str, str], AppConfig | str]] = [
    ("a token alone", {"github_token": TOKEN}, TOKEN_ONLY),
    ("a complete App alone", APP, APP_ONLY),
    ("a complete App whose ID is a number", {**APP, "github_app_id": "123"}, AppConfig(
        github_app_id="123", github_app_installation_id=42, github_app_private_key=PRIVATE_KEY)),
    ("a token and a complete App", {"github_token": TOKEN, **APP}, BOTH_PROVIDED),
    ("a token and an App ID", {"github_token": TOKEN, "github_app_id": "1"}, TOKEN_ONLY),
    ("a token and an App without its key", {"github_token": TOKEN, **APP, "github_app_private_key": ""}, TOKEN_ONLY),
    ("a token and an App with installation 0", {"github_token": TOKEN, **APP, "github_app_installation_id": "0"},
     TOKEN_ONLY),
    ("an App without its installation ID", {**APP, "github_app_installation_id": ""}, NONE_PROVIDED),
    ("an App with installation 0", {**APP, "github_app_installation_id": "0"}, NONE_PROVIDED),
    ("an App with a negative installation", {**APP, "github_app_installation_id": "-3"}, NONE_PROVIDED),
    ("an App without its private key", {**APP, "github_app_private_key": ""}, NONE_PROVIDED),
    ("an App ID alone", {"github_app_id": "1"}, NONE_PROVIDED),
    ("an empty token", {"github_token": ""}, NONE_PROVIDED),
    ("nothing", {}, NONE_PROVIDED),
]  # fmt: skip


@pytest.mark.parametrize(("case", "data", "expected"), RULE_TABLE, ids=[case for case, _, _ in RULE_TABLE])
def test_the_secret_gives_arcs_credentials_or_arcs_message(
    case: str, data: dict[str, str], expected: AppConfig | str
) -> None:
    if isinstance(expected, AppConfig):
        assert app_config_from_secret_data(data) == expected
        return
    with pytest.raises(CredentialsError) as caught:
        app_config_from_secret_data(data)
    assert str(caught.value).startswith(expected)
    assert TOKEN not in str(caught.value)
    assert "MIIsecret" not in str(caught.value)


def listener_config_outcome(data: dict[str, str]) -> AppConfig | str:
    """What the listener makes of a config.json carrying these credential fields: what it uses, or the problem."""
    document: dict[str, Any] = orjson.loads(ARC_WRITTEN_PAT_CONFIG)
    document["github_token"] = ""
    document.update(data)
    if "github_app_installation_id" in data:
        document["github_app_installation_id"] = int(data["github_app_installation_id"] or 0)
    try:
        return ListenerConfig.from_document(document).app_config()
    except ListenerConfigError as exc:
        (problem,) = exc.problems
        return problem


def controller_outcome(data: dict[str, str]) -> AppConfig | str:
    try:
        return app_config_from_secret_data(data)
    except CredentialsError as exc:
        return str(exc)


@pytest.mark.parametrize(("case", "data", "expected"), RULE_TABLE, ids=[case for case, _, _ in RULE_TABLE])
def test_the_controller_and_the_listener_config_agree(case: str, data: dict[str, str], expected: object) -> None:
    assert controller_outcome(data) == listener_config_outcome(data)


def test_arcs_messages_are_arcs_words() -> None:
    # controllers/actions.github.com/.../appconfig/appconfig.go (ARC 0.12 and later)
    assert BOTH_PROVIDED == "both PAT and GitHub App credentials provided. should only provide one"
    assert NONE_PROVIDED == "no credentials provided: either a PAT or GitHub App credentials should be provided"


def test_a_partial_app_is_told_which_keys_it_lacks() -> None:
    with pytest.raises(CredentialsError, match="lack github_app_installation_id, github_app_private_key"):
        app_config_from_secret_data({"github_app_id": "1"})


@pytest.mark.parametrize("value", ["abc", "1_000", "4.2", "٤٢", TOKEN])
def test_an_installation_id_that_is_not_an_integer_is_an_error_even_beside_a_token(value: str) -> None:
    # As ARC, which parses it before applying the rule; the value is never quoted (it may be a misplaced secret).
    with pytest.raises(CredentialsError) as caught:
        app_config_from_secret_data({"github_token": TOKEN, "github_app_installation_id": value})
    assert str(caught.value) == "github_app_installation_id is not an integer"


def test_values_are_stripped_and_read_from_bytes() -> None:
    data = {"github_app_id": b"123\n", "github_app_installation_id": b" 456\n", "github_app_private_key": b"KEY\n"}
    assert app_config_from_secret_data(data) == AppConfig(
        github_app_id="123", github_app_installation_id=456, github_app_private_key="KEY"
    )


def test_a_value_that_is_not_utf8_is_named_not_quoted() -> None:
    with pytest.raises(CredentialsError) as caught:
        app_config_from_secret_data({"github_token": b"\xff\xfe" + TOKEN.encode()})
    assert str(caught.value) == "github_token is not valid UTF-8 text"


def test_secrets_stay_out_of_the_repr() -> None:
    config = AppConfig(github_token=TOKEN, github_app_private_key=PRIVATE_KEY)
    assert TOKEN not in repr(config)
    assert "MIIsecret" not in repr(config)
    assert config.secrets() == (TOKEN, PRIVATE_KEY)

"""The GitHub credentials in a vault secret (``vaultConfig``): a JSON object read as ARC reads it, under the same
rule as a Kubernetes Secret, with messages that never quote a value."""

from __future__ import annotations

import json

import pytest

from arc_scaleset.api.credentials import BOTH_PROVIDED, NONE_PROVIDED, AppConfig, CredentialsError, app_config_from_json

TOKEN = "ghp_vaulted0123456789"
KEY = "-----BEGIN RSA PRIVATE KEY-----\nvaulted\n-----END RSA PRIVATE KEY-----\n"


def parse(document: object) -> AppConfig:
    return app_config_from_json(json.dumps(document))


def refusal(text: str) -> str:
    with pytest.raises(CredentialsError) as caught:
        app_config_from_json(text)
    message = str(caught.value)
    assert TOKEN not in message
    assert "vaulted" not in message
    return message


def test_a_token_alone_is_the_credentials() -> None:
    assert parse({"github_token": TOKEN}) == AppConfig(github_token=TOKEN)


def test_a_complete_app_is_the_credentials_with_its_installation_id_as_a_json_number() -> None:
    config = parse({"github_app_id": "123", "github_app_installation_id": 456, "github_app_private_key": KEY})
    assert config == AppConfig(github_app_id="123", github_app_installation_id=456, github_app_private_key=KEY)


def test_a_token_beside_part_of_an_app_uses_the_token_as_for_a_secret() -> None:
    assert parse({"github_token": TOKEN, "github_app_id": "123"}) == AppConfig(github_token=TOKEN)


def test_a_token_beside_a_complete_app_is_refused_with_arcs_words() -> None:
    text = json.dumps(
        {"github_token": TOKEN, "github_app_id": "1", "github_app_installation_id": 2, "github_app_private_key": KEY}
    )
    assert BOTH_PROVIDED in refusal(text)


def test_part_of_an_app_alone_is_refused_naming_what_is_missing() -> None:
    message = refusal(json.dumps({"github_app_id": "1", "github_app_private_key": KEY}))
    assert NONE_PROVIDED in message
    assert "github_app_installation_id" in message


def test_unknown_keys_and_nulls_are_ignored_as_go_decodes_them() -> None:
    assert parse({"github_token": TOKEN, "github_app_id": None, "comment": "rotated monthly"}) == AppConfig(
        github_token=TOKEN
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"github_app_id": "1", "github_app_installation_id": "2", "github_app_private_key": "k"}', "JSON integer"),
        ('{"github_app_id": "1", "github_app_installation_id": 2.5, "github_app_private_key": "k"}', "JSON integer"),
        ('{"github_token": 12345}', "github_token must be a JSON string"),
        (f'["{TOKEN}"]', "must be a JSON object"),
        (f"github_token={TOKEN}", "not valid JSON"),
    ],
)
def test_values_of_the_wrong_json_type_are_refused_without_quoting_them(text: str, expected: str) -> None:
    assert expected in refusal(text)

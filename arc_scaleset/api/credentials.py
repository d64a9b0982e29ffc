"""The GitHub credential rule, defined once: which credentials a scale set's Secret (or a listener's
``config.json``) gives, and when it gives none (docs/github.md, "Credentials").

It is ARC's rule (its ``appconfig`` package, 0.12 and later), with ARC's messages, so a Secret ARC accepts is
accepted here and one ARC refuses is refused with the words ARC's users know:

- a token alone: the token;
- a complete GitHub App (``github_app_id``, a ``github_app_installation_id`` above 0 and
  ``github_app_private_key``) alone: the App;
- a token and a complete App: an error, :data:`BOTH_PROVIDED`;
- a token and part of an App: the token (the App fields are dropped);
- part of an App alone, or nothing: an error, :data:`NONE_PROVIDED`.

The controller applies it to the Secret (:func:`app_config_from_secret_data`), the listener config model to
its fields (:meth:`AppConfig.problem`), and the listener takes what the model accepted: the three agree by
construction. Messages name keys, never values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

TOKEN_KEY: Final = "github_token"
APP_ID_KEY: Final = "github_app_id"
INSTALLATION_ID_KEY: Final = "github_app_installation_id"
PRIVATE_KEY_KEY: Final = "github_app_private_key"
APP_KEYS: Final = (APP_ID_KEY, INSTALLATION_ID_KEY, PRIVATE_KEY_KEY)
"""The keys of a GitHub config Secret (and of the listener's ``config.json``), ARC's."""

BOTH_PROVIDED: Final = "both PAT and GitHub App credentials provided. should only provide one"
"""ARC's message for a token together with a complete GitHub App."""
NONE_PROVIDED: Final = "no credentials provided: either a PAT or GitHub App credentials should be provided"
"""ARC's message for neither a token nor a complete GitHub App."""

# What Go's strconv.ParseInt(v, 10, 64) reads (Python's int() would also take "1_000" and non-ASCII digits).
_GO_INT: Final = re.compile(r"[+-]?[0-9]{1,19}")


class CredentialsError(Exception):
    """The credentials are missing, ambiguous or malformed; the message starts with ARC's words where ARC has
    some, and never contains a secret value.

    Not a ``ValueError``: raised inside a pydantic validator it reaches the caller untouched instead of being
    wrapped into an error that quotes the input.
    """


@dataclass(frozen=True)
class AppConfig:
    """The credential fields, as ARC's ``AppConfig`` holds them; secret values are kept out of ``repr``."""

    github_token: str = field(default="", repr=False)
    github_app_id: str = ""
    github_app_installation_id: int = 0
    github_app_private_key: str = field(default="", repr=False)

    @property
    def has_token(self) -> bool:
        return bool(self.github_token)

    @property
    def has_github_app(self) -> bool:
        """All three App fields present (an installation ID of 0 or less counts as missing), as ARC checks it."""
        return bool(self.github_app_id) and self.github_app_installation_id > 0 and bool(self.github_app_private_key)

    def missing_app_keys(self) -> list[str]:
        present = (bool(self.github_app_id), self.github_app_installation_id > 0, bool(self.github_app_private_key))
        return [key for key, there in zip(APP_KEYS, present, strict=True) if not there]

    def problem(self) -> str | None:
        """What is wrong with these credentials under the rule, or ``None`` when they can be used.

        The sentence is ARC's message, followed by what to change in parentheses.
        """
        if self.has_token and self.has_github_app:
            return f"{BOTH_PROVIDED} (remove {TOKEN_KEY} or the {', '.join(APP_KEYS)} keys)"
        if self.has_token or self.has_github_app:
            return None
        missing = self.missing_app_keys()
        if len(missing) < len(APP_KEYS):
            hint = f"the GitHub App credentials lack {', '.join(missing)}"
        else:
            hint = f"set {TOKEN_KEY}, or {APP_ID_KEY}, {INSTALLATION_ID_KEY} and {PRIVATE_KEY_KEY}"
        return f"{NONE_PROVIDED} ({hint})"

    def validated(self) -> AppConfig:
        """The credentials that will be used (ARC's ``tidy``): the token alone when there is one, else the App's
        three fields; :class:`CredentialsError` with :meth:`problem` when the rule refuses them."""
        problem = self.problem()
        if problem is not None:
            raise CredentialsError(problem)
        if self.has_token:
            return AppConfig(github_token=self.github_token)
        return AppConfig(
            github_app_id=self.github_app_id,
            github_app_installation_id=self.github_app_installation_id,
            github_app_private_key=self.github_app_private_key,
        )

    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown (for log redaction)."""
        return tuple(value for value in (self.github_token, self.github_app_private_key) if value)


def app_config_from_secret_data(data: Mapping[str, bytes | str]) -> AppConfig:
    """The credentials a GitHub config Secret's data (base64-decoded) gives under the rule, as
    :meth:`AppConfig.validated` returns them; :class:`CredentialsError` otherwise.

    As ARC: a non-empty ``github_app_installation_id`` must be an integer even when a token is present (ARC
    parses it before applying the rule). Unlike ARC, values are stripped of surrounding whitespace first: a
    Secret made from files written by ``echo`` ends each value with a newline, which ARC would send to GitHub.
    """
    values = {key: _text(key, data[key]).strip() for key in (TOKEN_KEY, *APP_KEYS) if key in data}
    installation_text = values.get(INSTALLATION_ID_KEY, "")
    installation_id = 0
    if installation_text:
        if _GO_INT.fullmatch(installation_text) is None:
            # Not quoted: an installation ID is not secret, but the value might be a secret in the wrong key.
            raise CredentialsError(f"{INSTALLATION_ID_KEY} is not an integer")
        installation_id = int(installation_text, 10)
    return _validated(values, installation_id)


def _validated(values: Mapping[str, str], installation_id: int) -> AppConfig:
    """The credentials of the parsed ``values`` (string fields by key), under the credential rule."""
    return AppConfig(
        github_token=values.get(TOKEN_KEY, ""),
        github_app_id=values.get(APP_ID_KEY, ""),
        github_app_installation_id=installation_id,
        github_app_private_key=values.get(PRIVATE_KEY_KEY, ""),
    ).validated()


def _text(key: str, value: bytes | str) -> str:
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise CredentialsError(f"{key} is not valid UTF-8 text") from None


def app_config_from_json(text: str) -> AppConfig:
    """The credentials a vault secret's value gives (``vaultConfig``: a JSON object with the same keys as the
    Secret), under the same rule; :class:`CredentialsError` otherwise.

    Decoded as ARC decodes it (Go's ``encoding/json`` into its ``AppConfig``): unknown keys and ``null`` are
    ignored, ``github_app_installation_id`` is a JSON integer (not a string, unlike in a Secret), the other
    values are strings. Messages name keys and JSON types, never values.
    """
    try:
        document = json.loads(text)
    except ValueError:
        # json's message quotes the text around the fault, which is a secret here.
        raise CredentialsError(
            "the vault secret is not valid JSON (expected an object with the GitHub credentials)"
        ) from None
    if not isinstance(document, dict):
        raise CredentialsError(f"the vault secret must be a JSON object, not a JSON {_json_type(document)}")
    values: dict[str, str] = {}
    for key in (TOKEN_KEY, APP_ID_KEY, PRIVATE_KEY_KEY):
        value = document.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise CredentialsError(f"{key} must be a JSON string, not a JSON {_json_type(value)}")
        values[key] = value
    installation_id = document.get(INSTALLATION_ID_KEY)
    if installation_id is None:
        installation_id = 0
    elif isinstance(installation_id, bool) or not isinstance(installation_id, int):
        raise CredentialsError(
            f"{INSTALLATION_ID_KEY} must be a JSON integer, not a JSON {_json_type(installation_id)}"
        )
    elif not -(2**63) <= installation_id < 2**63:
        raise CredentialsError(f"{INSTALLATION_ID_KEY} is out of range for a 64-bit integer")
    return _validated(values, installation_id)


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"

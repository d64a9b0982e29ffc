"""Proving that secrets stay out of logs: record every secret a run hands out, then search the logs for them.

- :class:`SecretLedger` holds the secret values of a run (PATs, App private keys, JIT configs) with a label
  saying what each is; the label, never the value, is what a report shows.
- :class:`JitConfigCollector` watches Secrets and records every ``jitToken`` the controller writes, plus
  the credential material inside it, as the run goes.
- :func:`find_leaks` searches log files for every recorded value, and for any URL whose user information
  carries an unmasked password; :func:`find_leaks_in_objects` searches what the API server shows a user
  (Events, and the status and annotations of objects) the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Gone, KubeError

log = logging.getLogger(__name__)

JIT_TOKEN_KEY = "jitToken"
# Shorter strings could occur in a log by chance; every secret we record is far longer.
MIN_SECRET_LENGTH = 16


@dataclass(frozen=True)
class Leak:
    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


class SecretLedger:
    """Secret values of a run, each with a description (``values`` maps value -> description)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def __repr__(self) -> str:  # never the values
        return f"SecretLedger({len(self.values)} secrets)"

    def __len__(self) -> int:
        return len(self.values)

    def add(self, value: str, what: str) -> None:
        value = value.strip()
        if len(value) >= MIN_SECRET_LENGTH:
            self.values.setdefault(value, what)

    def add_private_key(self, pem: str, what: str) -> None:
        """The key's base64 body lines: any one of them in a log is a leak (a log may re-wrap the PEM)."""
        for line in pem.splitlines():
            if line.strip() and not line.startswith("-----"):
                self.add(line, what)

    def add_jit_config(self, encoded: str, what: str) -> None:
        """The encoded JIT config and the credentials inside it (decoded, in case a log shows those)."""
        self.add(encoded, what)
        try:
            files = orjson.loads(base64.b64decode(encoded))
            for name in (".credentials", ".credentials_rsaparams"):
                if name in files:
                    self.add(files[name], f"{what} ({name})")
            if ".credentials_rsaparams" in files:
                # The runner's private key material: its values are the secret, wherever they appear.
                inner = orjson.loads(base64.b64decode(files[".credentials_rsaparams"]))
                for value in _string_leaves(inner):
                    self.add(value, f"{what} (private key parameter)")
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
            pass  # not shaped like a JIT config: the encoded value alone is what we can look for


def _string_leaves(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


# A URL whose user information carries a password that is not masked: a leak whoever's password it is, so it is
# searched for without the ledger (a proxy URL built from a Secret, a clone URL, a database URL).
URL_WITH_PASSWORD = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/?#@:\"']*:(?!\[REDACTED\]@)[^\s/?#@\"']+@")
URL_WITH_PASSWORD_LEAK = "a URL with a password in its user information"


def find_leaks(paths: Iterable[Path], ledger: SecretLedger) -> list[Leak]:
    """Every (file, line) where a recorded secret, or a URL with an unmasked password, occurs. Files are read
    as bytes, decoded leniently."""
    leaks: list[Leak] = []
    needles = list(ledger.values.items())
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if not any(value in text for value, _ in needles) and not URL_WITH_PASSWORD.search(text):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            leaks.extend(Leak(path, number, what) for what in _leaks_in(line, needles))
    return leaks


def _leaks_in(text: str, needles: Iterable[tuple[str, str]]) -> Iterable[str]:
    """What of ``needles`` (value, description) ``text`` holds, and whether it holds a URL with a password."""
    yield from (what for value, what in needles if value in text)
    if URL_WITH_PASSWORD.search(text):
        yield URL_WITH_PASSWORD_LEAK


@dataclass(frozen=True)
class ObjectLeak:
    """A recorded secret in an object's text: which object, which field, what the secret was."""

    kind: str
    namespace: str
    name: str
    field: str
    what: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} {self.field}: {self.what}"


def _object_text_fields(obj: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """(field, text) pairs a user reads: an Event's every field; otherwise status and annotations."""
    if obj.get("kind") == "Event":
        yield from (("event", leaf) for leaf in _string_leaves(dict(obj)))
        return
    yield from (("status", leaf) for leaf in _string_leaves(obj.get("status") or {}))
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    yield from (("annotations", leaf) for leaf in _string_leaves(dict(annotations)))


def find_leaks_in_objects(objects: Iterable[Mapping[str, Any]], ledger: SecretLedger) -> list[ObjectLeak]:
    """Every object field (Event text, status, annotations) where a recorded secret, or a URL with an unmasked
    password, occurs."""
    leaks: list[ObjectLeak] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        kind, namespace, name = str(obj.get("kind", "?")), str(meta.get("namespace", "")), str(meta.get("name", "?"))
        for field, text in _object_text_fields(obj):
            leaks.extend(
                ObjectLeak(kind, namespace, name, field, what) for what in _leaks_in(text, ledger.values.items())
            )
    return leaks


class JitConfigCollector:
    """Watches Secrets in every namespace; records each ``jitToken`` into ``ledger``. Cancel to stop."""

    def __init__(self, kube: KubeClient, ledger: SecretLedger) -> None:
        self._kube = kube
        self._ledger = ledger
        self.seen = 0

    def _record(self, secret: dict[str, Any]) -> None:
        data = secret.get("data") or {}
        encoded = data.get(JIT_TOKEN_KEY)
        if not encoded:
            return
        with contextlib.suppress(ValueError, binascii.Error):
            name = (secret.get("metadata") or {}).get("name", "?")
            self._ledger.add_jit_config(base64.b64decode(encoded).decode(), f"JIT config of {name}")
            self.seen += 1

    async def run(self) -> None:
        while True:
            try:
                listed = await self._kube.list(resources.SECRETS)
                for item in listed.items:
                    self._record(item)
                async for event in self._kube.watch(resources.SECRETS, resource_version=listed.resource_version):
                    if event.type in ("ADDED", "MODIFIED"):
                        self._record(event.object)
            except Gone:
                continue
            except KubeError as error:
                log.warning("JIT config collector: watch failed, relisting: %s", error)
                await asyncio.sleep(0.5)

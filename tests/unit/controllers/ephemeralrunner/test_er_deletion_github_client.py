"""A runner's deletion reaches GitHub through the pooled client: with GitHub App credentials, the App's private
key is parsed once per client, not once per deleted runner (issue 20: a scale-down of 200 spent most of its CPU
re-parsing it). The Kubernetes API and the Actions service are the fakes of tests/unit/fakes.py here; the real
ones are exercised by tests/integration/controllers/ephemeralrunnerset (scale-down) and bench/bench_scale_up.py
(``--credentials app``)."""

from __future__ import annotations

import types
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import arc_scaleset.github.credentials as credentials_module
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import EPHEMERAL_RUNNER_FINALIZER, EPHEMERAL_RUNNER_REGISTRATION_FINALIZER
from arc_scaleset.clock import FakeClock
from arc_scaleset.controllers.ephemeralrunner.deletion import finalize_runner
from arc_scaleset.controllers.errors import InvalidSecret
from arc_scaleset.controllers.github_access import GitHubAccess
from arc_scaleset.controllers.handoff import DeletedChildren, RemovedRegistrations
from arc_scaleset.github import ActionsClientPool, GitHubApp, SystemInfo
from arc_scaleset.github.rs256 import load_pem_private_key
from tests.unit.fakes import FakeActions, FakeKube

NAMESPACE = "runners"
SECRET_NAME = "gh-app"
RUNNERS = 50


def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="module")
def pems() -> tuple[str, str]:
    return _pem(), _pem()


def _app_secret(pem: str) -> dict[str, str]:
    return {"github_app_id": "123", "github_app_installation_id": "456", "github_app_private_key": pem}


def _context(kube: FakeKube, built: list[FakeActions]) -> Any:
    clock = FakeClock()
    pool = ActionsClientPool(
        system_info=SystemInfo(subsystem="controller"),
        clock=clock,
        factory=FakeActions.pool_factory(built),  # type: ignore[arg-type]  # the methods a deletion calls
    )
    github = GitHubAccess(kube, pool=pool, environ={})  # type: ignore[arg-type]  # the fake has what is used
    no_pods = types.SimpleNamespace(get=lambda namespace, name: None)
    return types.SimpleNamespace(
        kube=kube,
        github=github,
        clock=clock,
        cache=lambda resource: no_pods,
        removed_registrations=RemovedRegistrations(),
        deleted_children=DeletedChildren(),
    )


def _runner(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": EPHEMERAL_RUNNERS.kind,
        "metadata": {
            "name": f"set-runner-{index:04d}",
            "namespace": NAMESPACE,
            "uid": f"uid-{index}",
            "deletionTimestamp": "2025-01-01T00:00:00Z",
            "finalizers": [EPHEMERAL_RUNNER_REGISTRATION_FINALIZER, EPHEMERAL_RUNNER_FINALIZER],
        },
        "spec": {"githubConfigUrl": "https://github.com/org", "githubConfigSecret": SECRET_NAME},
        "status": {"runnerId": 1000 + index},
    }


@pytest.fixture
def key_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the PEM parses of GitHub App keys (a spy around the loader)."""
    calls: list[int] = []

    def spy(data: bytes) -> Any:
        calls.append(1)
        return load_pem_private_key(data)

    monkeypatch.setattr(credentials_module, "load_pem_private_key", spy)
    return calls


@pytest.fixture
def built() -> list[FakeActions]:
    """The Actions-service clients the pool built, in order."""
    return []


async def test_many_runner_deletions_with_a_github_app_parse_its_key_once(
    pems: tuple[str, str], key_loads: list[int], built: list[FakeActions]
) -> None:
    ctx = _context(FakeKube({SECRET_NAME: _app_secret(pems[0])}), built)

    for index in range(RUNNERS):
        await finalize_runner(ctx, _runner(index))

    assert len(key_loads) == 1
    [client] = built
    assert isinstance(client.credentials, GitHubApp)
    assert client.removed == [1000 + index for index in range(RUNNERS)]


async def test_a_rotated_app_key_is_parsed_once_more_and_used_by_a_new_client(
    pems: tuple[str, str], key_loads: list[int], built: list[FakeActions]
) -> None:
    kube = FakeKube({SECRET_NAME: _app_secret(pems[0])})
    ctx = _context(kube, built)
    for index in range(10):
        await finalize_runner(ctx, _runner(index))

    kube.secrets[SECRET_NAME] = _app_secret(pems[1])
    for index in range(10, 20):
        await finalize_runner(ctx, _runner(index))

    assert len(key_loads) == 2
    keys = [c.credentials.private_key for c in built if isinstance(c.credentials, GitHubApp)]
    assert keys == [pem.strip() for pem in pems]
    assert [len(c.removed) for c in built] == [10, 10]


async def test_a_malformed_app_key_still_fails_the_deletion_as_an_invalid_secret(
    key_loads: list[int], built: list[FakeActions]
) -> None:
    malformed = _app_secret("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----")
    ctx = _context(FakeKube({SECRET_NAME: malformed}), built)
    ctx.events = types.SimpleNamespace(event=_ignore)

    for _ in range(2):  # refused every time: nothing is pooled for credentials that cannot be built
        with pytest.raises(InvalidSecret, match="github_app_private_key could not be parsed"):
            await finalize_runner(ctx, _runner(0))
    assert built == []
    assert len(ctx.github.pool) == 0


async def _ignore(*_: Any, **__: Any) -> None:
    return None

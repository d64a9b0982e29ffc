"""Azure Key Vault, end to end (issue 17): a scale set whose GitHub credentials live only in the vault.

The system here is a module of its own: its sim serves HTTPS and is Azure too (the identity endpoint and Key
Vault of ``arc_scaleset_lab/sim/azure.py``), and the controller and the listeners reach it with the real Azure
SDK, trusting the sim's CA through the system store (``SystemOptions.azure_on_sim``). No Kubernetes Secret holds
the credentials: ``githubConfigSecret`` names the vault secret. The listener pod gets ``AZURE_AUTHORITY_HOST``
through ``listenerTemplate``, as a sovereign cloud's users set it; the certificate file is on this machine, where
the lab's listener processes run (a cluster mounts it into the pod with ``listenerTemplate`` volumes).
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arc_scaleset.api import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.api.naming import listener_config_secret_name, listener_pod_name
from arc_scaleset.github import fingerprint_of_fields
from arc_scaleset.github.keyvault import VERIFY_CHALLENGE_RESOURCE_ENV
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.secret_scan import find_leaks, find_leaks_in_objects
from arc_scaleset_lab.harness.system import System, SystemOptions
from arc_scaleset_lab.sim.azure import make_client_certificate
from tests.e2e.harness import ScaleSetHandle, describe, listener_recreations, started_system

RUN_ID = uuid.uuid4().hex[:6]
NAMESPACE = f"e2e-vault-{RUN_ID}"
TENANT = str(uuid.uuid4())
CLIENT = str(uuid.uuid4())
REFRESH = "2s"  # --vault-refresh-interval: short, so a rotation is seen within seconds


@dataclass
class VaultWorld:
    system: System
    certificate_path: str


@pytest.fixture(scope="module")
async def world(cluster: TestCluster) -> AsyncIterator[VaultWorld]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-vault-"))
    options = SystemOptions(
        controller_namespace=f"arc-e2e-vault-{RUN_ID}",
        watch_namespace=NAMESPACE,
        long_poll_seconds=2.0,
        session_timeout=10.0,
        log_level="debug",  # the most a log can say: the secrets check is strongest at this level
        sim_tls=True,
        azure_on_sim=True,
        controller_args=(f"--vault-refresh-interval={REFRESH}",),
    )
    async with started_system(workdir, kubeconfig=cluster.kubeconfig, namespace=NAMESPACE, options=options) as running:
        pem = make_client_certificate(CLIENT)
        running.ledger.add_private_key(pem[pem.index("-----BEGIN PRIVATE KEY-----") :], "vault client key")
        certificate = workdir / "vault-client.pem"
        certificate.touch(mode=0o600)
        certificate.write_text(pem)
        await running.sim.register_azure_client(tenant_id=TENANT, client_id=CLIENT, certificate_pem=pem)
        yield VaultWorld(running, str(certificate))
        # Nothing the system wrote about the scale sets carries a credential.
        objects = [
            *(await running.kube.list(resources.EVENTS, namespace=NAMESPACE)).items,
            *(await running.kube.list(resources.EVENTS, namespace=running.controller_namespace)).items,
            *(await running.kube.list(AUTOSCALING_RUNNER_SETS, namespace=NAMESPACE)).items,
        ]
        object_leaks = find_leaks_in_objects(objects, running.ledger)
        assert not object_leaks, "secrets found in objects:\n" + "\n".join(map(str, object_leaks[:20]))
    leaks = find_leaks(running.log_files(), running.ledger)
    assert not leaks, "secrets found in logs:\n" + "\n".join(map(str, leaks[:20]))
    shutil.rmtree(workdir, ignore_errors=True)


def _vault_config(world: VaultWorld, *, client_id: str = CLIENT, certificate_path: str | None = None) -> dict[str, Any]:
    return {
        "type": "azure_key_vault",
        "azureKeyVault": {
            "url": world.system.sim_url + "/",
            "tenantId": TENANT,
            "clientId": client_id,
            "certificatePath": certificate_path or world.certificate_path,
        },
    }


@contextlib.asynccontextmanager
async def _vault_scale_set(
    world: VaultWorld, name: str, *, vault_secret: str, min_runners: int = 1, **vault: Any
) -> AsyncIterator[ScaleSetHandle]:
    system = world.system
    manifest = scale_sets.autoscaling_runner_set(
        name=name,
        namespace=NAMESPACE,
        config_url=system.config_url(),
        secret=vault_secret,
        min_runners=min_runners,
        max_runners=4,
        template=scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "1"}),
    )
    manifest["spec"]["vaultConfig"] = _vault_config(world, **vault)
    manifest["spec"]["listenerTemplate"] = {
        "spec": {
            "containers": [
                {
                    "name": "listener",
                    "env": [
                        {"name": "AZURE_AUTHORITY_HOST", "value": system.sim_url},
                        {"name": VERIFY_CHALLENGE_RESOURCE_ENV, "value": "false"},
                    ],
                }
            ]
        }
    }
    handle = ScaleSetHandle.tracked(system, namespace=NAMESPACE, name=name, min_runners=min_runners)
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=NAMESPACE)
    try:
        yield handle
    finally:
        await handle.stop_tracking()
        with contextlib.suppress(Exception, pytest.fail.Exception):
            await handle.delete(timeout=60.0)


def _pat_json(token: str) -> str:
    return json.dumps({"github_token": token})


async def _new_pat(system: System) -> str:
    token = "ghp_" + secrets.token_hex(18)
    system.ledger.add(token, "rotated PAT")
    await system.sim.add_token(token)
    return token


async def _condition(handle: ScaleSetHandle, reason: str) -> dict[str, Any] | None:
    ars = (await handle.snapshot()).ars or {}
    for condition in ars.get("status", {}).get("conditions", []):
        if condition.get("reason") == reason:
            return dict(condition)
    return None


async def _events(system: System, name: str, reason: str) -> list[dict[str, Any]]:
    events = (await system.kube.list(resources.EVENTS, namespace=NAMESPACE)).items
    return [e for e in events if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == name]


async def test_a_scale_set_whose_credentials_live_only_in_the_vault_scales_up_and_down(world: VaultWorld) -> None:
    system = world.system
    await system.sim.set_vault_secret("vaulted-github", _pat_json(system.pat))
    reads_before = (await system.sim.azure_stats())["secretReads"]
    async with _vault_scale_set(world, "vaulted", vault_secret="vaulted-github") as runners:
        ready = await runners.wait_ready(timeout=90)
        await runners.enqueue(4, duration=1.0)
        await runners.assert_every_job_ran_once(timeout=120)
        settled = await runners.wait_settled(timeout=120)
        assert settled.idle_running == 1, describe(settled)

        # No Kubernetes Secret of that name: the credentials came from the vault only.
        with pytest.raises(NotFound):
            await system.kube.get(resources.SECRETS, "vaulted-github", namespace=NAMESPACE)
        # The listener's config names the vault, as ARC's controller writes it, and holds no credentials.
        assert ready.listener_name
        secret = await system.kube.get(
            resources.SECRETS, listener_config_secret_name(ready.listener_name), namespace=system.controller_namespace
        )
        config = json.loads(base64.b64decode(secret["data"]["config.json"]))
        assert config["vault_type"] == "azure_key_vault"
        assert config["vault_lookup_key"] == "vaulted-github"
        assert config["azure_key_vault"] == {
            "tenant_id": TENANT,
            "client_id": CLIENT,
            "url": system.sim_url + "/",
            "certificate_path": world.certificate_path,
        }
        assert config["github_token"] == ""
        assert config["github_app_private_key"] == ""
        reads = (await system.sim.azure_stats())["secretReads"] - reads_before
        print(f"\nvault reads for one scale set's life (4 jobs): {reads}")


async def test_rotating_the_secret_in_the_vault_reaches_the_listener_once_and_the_next_runners(
    world: VaultWorld,
) -> None:
    system = world.system
    original = await _new_pat(system)  # its own token, revoked below (the system's PAT serves other tests)
    await system.sim.set_vault_secret("rotated-github", _pat_json(original))
    async with _vault_scale_set(world, "rotated", vault_secret="rotated-github") as runners:
        ready = await runners.wait_ready(timeout=90)
        listener = ready.listener_name
        assert listener
        pod_name = listener_pod_name(listener)

        async def pod() -> dict[str, Any] | None:
            try:
                return await system.kube.get(resources.PODS, pod_name, namespace=system.controller_namespace)
            except NotFound:
                return None

        first = await pod()
        assert first is not None
        recreated_before = await listener_recreations(system, listener)

        rotated = await _new_pat(system)
        await system.sim.set_vault_secret("rotated-github", _pat_json(rotated))
        expected_stamp = "vault:" + fingerprint_of_fields(AppConfig(github_token=rotated))[:16]

        async def new_pod_for_the_rotated_secret() -> bool:
            current = await pod()
            if current is None or current["metadata"]["uid"] == first["metadata"]["uid"]:
                return False
            return any(v.endswith(expected_stamp) for v in (current["metadata"].get("annotations") or {}).values())

        await runners.wait_until(
            new_pod_for_the_rotated_secret, timeout=60, what="a new listener pod for the rotated vault secret"
        )
        await runners.wait(lambda s: s.session_owner is not None, timeout=60, what="the new listener's session")
        # The old token is revoked and every admin token issued so far ended: only the rotated token can still
        # register runners and hold a session, so the jobs below run only if the controller (the next runners'
        # JIT configs) and the listener both use it.
        await system.sim.revoke_token(original)
        await system.sim.expire_admin_tokens()
        await runners.enqueue(2, duration=0.5)
        await runners.assert_every_job_ran_once(timeout=90)
        # Several refresh intervals went by while the jobs ran: the listener was recreated once, not again.
        assert await listener_recreations(system, listener) == recreated_before + 1


async def test_a_missing_vault_secret_is_a_condition_and_an_event_until_it_is_created(world: VaultWorld) -> None:
    system = world.system
    async with _vault_scale_set(world, "missing", vault_secret="not-yet-there") as runners:

        async def reported() -> dict[str, Any] | None:
            return await _condition(runners, "VaultSecretNotFound")

        condition = await runners.wait_until(reported, timeout=60, what="a VaultSecretNotFound condition")
        assert "'not-yet-there'" in condition["message"], condition
        events = await runners.wait_until(
            lambda: _events(system, "missing", "VaultSecretNotFound"), timeout=30, what="a VaultSecretNotFound Event"
        )
        assert events[0]["type"] == "Warning"

        await system.sim.set_vault_secret("not-yet-there", _pat_json(system.pat))
        await runners.wait_ready(timeout=120)
        assert await _condition(runners, "VaultSecretNotFound") is None


async def test_a_certificate_the_tenant_does_not_know_is_a_condition_until_it_is_registered(world: VaultWorld) -> None:
    system = world.system
    await system.sim.set_vault_secret("wrong-cert-github", _pat_json(system.pat))
    client_id = str(uuid.uuid4())
    pem = make_client_certificate(client_id)
    system.ledger.add_private_key(pem[pem.index("-----BEGIN PRIVATE KEY-----") :], "second vault client key")
    certificate = Path(world.certificate_path).with_name("second-client.pem")
    certificate.touch(mode=0o600)
    certificate.write_text(pem)
    # The tenant knows this client by another certificate.
    await system.sim.register_azure_client(
        tenant_id=TENANT, client_id=client_id, certificate_pem=make_client_certificate(client_id)
    )
    async with _vault_scale_set(
        world, "wrong-cert", vault_secret="wrong-cert-github", client_id=client_id, certificate_path=str(certificate)
    ) as runners:

        async def reported() -> dict[str, Any] | None:
            return await _condition(runners, "VaultUnavailable")

        condition = await runners.wait_until(reported, timeout=60, what="a VaultUnavailable condition")
        assert "AADSTS700027" in condition["message"], condition
        assert await _events(system, "wrong-cert", "VaultUnavailable")

        await system.sim.register_azure_client(tenant_id=TENANT, client_id=client_id, certificate_pem=pem)
        await runners.wait_ready(timeout=120)
        assert await _condition(runners, "VaultUnavailable") is None

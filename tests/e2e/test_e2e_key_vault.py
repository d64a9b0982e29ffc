"""Azure Key Vault, end to end (issue 17): a scale set whose GitHub credentials live only in the vault.

The system here is a module of its own: its sim serves HTTPS and is Azure too (the identity endpoint and Key
Vault of ``arc_scaleset_lab/sim/azure.py``), and the controller and the listeners reach it with the real Azure
SDK, trusting the sim's CA through the system store (``SystemOptions.azure_on_sim``). No Kubernetes Secret holds
the credentials: ``githubConfigSecret`` names the vault secret. Only the controller reads the vault, under the
admin's allow list (``--vault-allow-list``, ConfigMap :data:`ALLOW_LIST`): the listener gets the credentials in
its config Secret, as from a Kubernetes Secret, and its pod has no vault settings, certificate or Azure
environment (issue 26).
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
from urllib.parse import urlsplit

import pytest

from arc_scaleset.api.constants import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.naming import listener_config_secret_name, listener_pod_name
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
ALLOW_LIST = "vault-allow-list"
SECOND_CERTIFICATE = "second-client.pem"  # beside the first; allowed too, for the certificate the tenant refuses
TEAM_A = f"e2e-vault-team-a-{RUN_ID}"  # another team's namespace, allowed its own vault secrets only


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
        controller_args=(f"--vault-refresh-interval={REFRESH}", f"--vault-allow-list={ALLOW_LIST}"),
    )
    async with started_system(workdir, kubeconfig=cluster.kubeconfig, namespace=NAMESPACE, options=options) as running:
        pem = make_client_certificate(CLIENT)
        running.ledger.add_private_key(pem[pem.index("-----BEGIN PRIVATE KEY-----") :], "vault client key")
        certificate = workdir / "vault-client.pem"
        certificate.touch(mode=0o600)
        certificate.write_text(pem)
        await running.sim.register_azure_client(tenant_id=TENANT, client_id=CLIENT, certificate_pem=pem)
        await _allow_vaults(running, str(certificate))
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


async def _allow_vaults(system: System, certificate_path: str) -> None:
    """The cluster admin's allow list: this module's namespace may use the sim's vault with both client
    certificates for its own secrets, sent to the sim's GitHub; team A (a namespace of its own) only ``team-a-``
    secrets."""
    host = urlsplit(system.config_url()).netloc

    def grant(prefixes: list[str]) -> str:
        return json.dumps(
            {
                "vaultUrls": [system.sim_url + "/"],
                "certificatePaths": [certificate_path, str(Path(certificate_path).with_name(SECOND_CERTIFICATE))],
                "secretPrefixes": prefixes,
                "githubHosts": [host],
            }
        )

    config_map = {
        "metadata": {"name": ALLOW_LIST},
        "data": {
            NAMESPACE: grant(["vaulted-", "rotated-", "not-yet-there", "wrong-cert-"]),
            TEAM_A: grant(["team-a-"]),
        },
    }
    await system.kube.create(resources.CONFIG_MAPS, config_map, namespace=system.controller_namespace)


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
    # No listenerTemplate: the listener reaches no vault, so it needs no certificate and no Azure environment.
    handle = ScaleSetHandle.tracked(system, namespace=NAMESPACE, name=name, min_runners=min_runners)
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=NAMESPACE)
    try:
        yield handle
    finally:
        await handle.stop_tracking()
        with contextlib.suppress(Exception, pytest.fail.Exception):
            await handle.delete(timeout=60.0)


async def _listener_config(system: System, listener: str) -> dict[str, Any]:
    secret = await system.kube.get(
        resources.SECRETS, listener_config_secret_name(listener), namespace=system.controller_namespace
    )
    config: dict[str, Any] = json.loads(base64.b64decode(secret["data"]["config.json"]))
    return config


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
        # The listener's config holds the credentials the controller read from the vault, as from a Secret,
        # and nothing about the vault: the listener pod needs no certificate (ARC's controller writes the vault
        # settings and lets the listener read the vault with the certificate mounted into its pod).
        assert ready.listener_name
        config = await _listener_config(system, ready.listener_name)
        assert config["github_token"] == system.pat
        assert config["vault_type"] == ""
        assert config["vault_lookup_key"] == ""
        assert "azure_key_vault" not in config
        pod = await system.kube.get(
            resources.PODS, listener_pod_name(ready.listener_name), namespace=system.controller_namespace
        )
        assert world.certificate_path not in json.dumps(pod["spec"])
        mounted_secrets = [v["secret"].get("secretName") for v in pod["spec"].get("volumes", []) if "secret" in v]
        assert mounted_secrets == [listener_config_secret_name(ready.listener_name)]
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

        async def new_pod_for_the_rotated_secret() -> bool:
            # The controller rewrote the config Secret with the rotated token, and a new pod reads it.
            if (await _listener_config(system, listener))["github_token"] != rotated:
                return False
            current = await pod()
            return current is not None and current["metadata"]["uid"] != first["metadata"]["uid"]

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
    certificate = Path(world.certificate_path).with_name(SECOND_CERTIFICATE)
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


async def test_a_scale_set_copying_another_namespaces_vault_config_gets_no_credentials_and_a_condition(
    world: VaultWorld,
) -> None:
    # Team A keeps its PAT in the vault; the admin allowed only team A's namespace to read team-a- secrets. A
    # scale set in this namespace names the same vault, certificate and secret.
    system = world.system
    await system.sim.set_vault_secret("team-a-github", _pat_json(await _new_pat(system)))
    async with _vault_scale_set(world, "copycat", vault_secret="team-a-github") as runners:

        async def reported() -> dict[str, Any] | None:
            return await _condition(runners, "VaultNotAllowed")

        condition = await runners.wait_until(reported, timeout=60, what="a VaultNotAllowed condition")
        assert f"namespace {NAMESPACE!r} may not read vault secret 'team-a-github'" in condition["message"]
        assert f"ConfigMap {system.controller_namespace}/{ALLOW_LIST}" in condition["message"]
        events = await runners.wait_until(
            lambda: _events(system, "copycat", "VaultNotAllowed"), timeout=30, what="a VaultNotAllowed Event"
        )
        assert events[0]["type"] == "Warning"
        # Nothing was read from the vault for it, so no listener and no runner got team A's credentials.
        stats = await system.sim.azure_stats()
        assert stats["secretReadsByName"].get("team-a-github", 0) == 0
        snapshot = await runners.snapshot()
        assert snapshot.listener_name is None, describe(snapshot)

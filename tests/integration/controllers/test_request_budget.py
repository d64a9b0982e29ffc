"""Issue 30's request budget: a scale set's passes read its credentials Secret from the API server once per
change of the Secret, not once per pass (controllers/referenced_data.py); one job costs the controller at most
``JOB_BUDGET`` requests."""

from __future__ import annotations

import base64
import collections
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.job_timeline import listener_milestones
from arc_scaleset.api.keys import EphemeralRunnerPhase
from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset.api.naming import runner_proxy_secret_name
from arc_scaleset.controllers.autoscalingrunnerset.status import RUNNER_COUNTS
from arc_scaleset.controllers.ephemeralrunnerset.counts import COUNT_FIELDS
from arc_scaleset.controllers.metrics import runner_gauge_name
from arc_scaleset.controllers.referenced_objects import Reference
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.cluster.stages import EXIT_CODE_ANNOTATION, FINISH_ANNOTATION
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.waiting import eventually
from arc_scaleset_lab.sim import SimulatedGitHub
from tests.integration.controllers.harness import (
    ORG,
    RUNNER_CONTROLLERS,
    SCALE_SET_CONTROLLERS,
    ControllerHarness,
    Kind,
)
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    CLIENT_OPTIONS,
    DEFAULTS,
    PAT,
    RUNNER_TEMPLATE,
    SECRET_NAME,
    EnvFactory,
    _clean_up,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

PASSES = 8
ROTATED = "ghp_controller_integration_token_rotated"


def secret_gets(env: ControllerHarness) -> int:
    """GETs of Secrets in the scale set's namespace (the listener's own config Secret is in the controller's)."""
    return env.kube.namespace_request_counts[("get", resources.SECRETS.plural, env.namespace)]


async def resolutions(env: ControllerHarness, count: int) -> None:
    """Until the controllers have resolved the scale set's credentials ``count`` more times from memory."""
    reads = env.ctx.github.reads
    target = reads.reuses + count
    await eventually(lambda: reads.reuses >= target, f"{count} more resolutions of the credentials")


async def test_passes_of_a_scale_set_read_its_secret_once_per_change(start_env: EnvFactory) -> None:
    # Every pass checks the scale set on GitHub (each 0.2 s), and so resolves its credentials.
    async with start_env(scale_set_verify_interval=0.2) as env:
        secret = Reference("Secret", env.namespace, "gh-secret")
        reads = env.ctx.github.reads
        await env.create_ars()
        await eventually(env.running, "Running")
        # The listener exists: its credentials Secret is watched (metadata only) from now on.
        watched = await eventually(lambda: env.ctx.references.resource_version(secret), "the Secret to be watched")
        await resolutions(env, 1)  # the data for the version the watch shows, fetched by then

        gets, fetches = secret_gets(env), reads.fetches
        await resolutions(env, PASSES)
        assert secret_gets(env) == gets, "a pass of an unchanged scale set read its Secret from the API server"
        assert reads.fetches == fetches

        # A rotated Secret is read again once the watch has seen it, and once only (the scale set's passes and
        # the listener, rebuilt with the new credentials, share the read).
        env.sim.credentials.add_token(ROTATED)
        await env.kube.patch(resources.SECRETS, "gh-secret", {"stringData": {"github_token": ROTATED}},
                             namespace=env.namespace)  # fmt: skip

        def rotated() -> bool:
            return env.ctx.references.resource_version(secret) not in (None, watched)

        await eventually(rotated, "the watch to see the rotated Secret")
        await eventually(lambda: reads.fetches == fetches + 1, "the rotated Secret to be read")
        await resolutions(env, PASSES)
        assert reads.fetches == fetches + 1
        assert secret_gets(env) == gets + 1
        assert await env.running() is not None


# -- one job, end to end -------------------------------------------------------------------------------------

JOB_BUDGET = 8
"""Issue 30: the controllers' Kubernetes API requests for one job's runner, from the listener's scale-up to the
runner's deletion (the runner, its Secret and pod created, its status written twice, the pod's cost labels, the
runner deleted and its finalizers removed) ..."""
UNCOUNTED_BUDGET = JOB_BUDGET + 1
"""Issue 30's 10 and less, at the defaults (the runner counts in the metrics only, as in ARC's current code, #4557):
the runner's 8 and one write of the set's status at the runner's end, for the job it keeps in
``status.recentJobs`` and the finished-runner marker riding it."""
COUNTS_BUDGET = 4
"""With ``--runner-counts-in-status``, for the set's and the scale set's status: the runner counts (the runner's
start and its end, once each: counts/StatusPacer), with the set's finished-runner marker riding the set's second
write (ephemeralrunnerset/finished_marker.py). The price of ``kubectl get``'s count columns."""
ALL_CONTROLLERS: tuple[Kind, ...] = (*SCALE_SET_CONTROLLERS, *RUNNER_CONTROLLERS)
GAUGED = {runner_gauge_name(phase) for phase in (EphemeralRunnerPhase.PENDING, EphemeralRunnerPhase.RUNNING,
                                                 EphemeralRunnerPhase.FAILED)}  # fmt: skip
"""The gauges of the runners ``currentReplicas`` counts (those that hold a slot)."""

Gauged = Callable[[], int]


def gauged_runners(env: ControllerHarness) -> Gauged:
    """The runners of the scale set's namespace the controllers' ``gha_controller_*_ephemeral_runners`` gauges count
    now, as ``currentReplicas`` counts them (pending, running, failed)."""
    assert env.ctx is not None
    registry = env.ctx.metrics.registry

    def count() -> int:
        samples = (sample for metric in registry.collect() for sample in metric.samples)
        return int(sum(s.value for s in samples if s.name in GAUGED and s.labels.get("namespace") == env.namespace))

    return count


async def set_settled(kube: KubeClient, namespace: str, ers: str, *, runners: int, gauged: Gauged | None) -> bool:
    """Whether the set holds ``runners`` runners, none deleting, and its and its scale set's status say so; with
    ``gauged`` (the counts in the metrics only) the gauges say so and neither status holds a count."""
    listed = (await kube.list(EPHEMERAL_RUNNERS, namespace=namespace)).items
    if len(listed) != runners or any(r["metadata"].get("deletionTimestamp") for r in listed):
        return False
    ers_status = (await kube.get(EPHEMERAL_RUNNER_SETS, ers, namespace=namespace)).get("status") or {}
    ars_status = (await kube.get(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=namespace)).get("status") or {}
    if gauged is not None:
        return gauged() == runners and "currentReplicas" not in ers_status and "currentRunners" not in ars_status
    return ers_status.get("currentReplicas", 0) == runners and ars_status.get("currentRunners", 0) == runners


async def run_job(
    kube: KubeClient, namespace: str, ers: str, patch_id: int, *, gauged: Gauged | None, timeline: bool = False
) -> None:
    """One job as the listener and the runner make it: the listener asks for a runner, the runner starts and
    takes the job (the listener's JobStarted patch; with ``timeline``, the job's timeline as the listener records
    it, which the set keeps in ``status.recentJobs``), exits 0, and the listener asks for none again. ``gauged``:
    the runner is counted by these gauges, not in the status (``None``: in the status)."""
    await kube.patch(EPHEMERAL_RUNNER_SETS, ers, {"spec": {"replicas": 1, "patchID": patch_id}}, namespace=namespace)

    async def running() -> dict[str, Any] | None:
        listed = (await kube.list(EPHEMERAL_RUNNERS, namespace=namespace)).items
        ok = [r for r in listed if (r.get("status") or {}).get("phase") == "Running" and r["status"].get("runnerId")]
        return ok[0] if ok else None

    runner = await eventually(running, "the job's runner to run")
    name = runner["metadata"]["name"]
    # A job lasts longer than the counts' 2 s: its runner shows in the set's and the scale set's counts.
    await eventually(lambda: set_settled(kube, namespace, ers, runners=1, gauged=gauged), "the runner in the counts")
    job: dict[str, Any] = {"jobId": f"job-{patch_id}", "jobRequestId": patch_id, "jobRepositoryName": f"{ORG}/repo"}
    if timeline:
        now = dt.datetime.now(dt.UTC)
        job["jobTimeline"] = listener_milestones(queued=now, acquired=now, assigned=now, started=now)
    await kube.patch(EPHEMERAL_RUNNERS, name, {"status": job}, namespace=namespace, subresource="status")
    await kube.patch(
        resources.PODS, name,
        {"metadata": {"annotations": {FINISH_ANNOTATION: "succeeded", EXIT_CODE_ANNOTATION: "0"}}},
        namespace=namespace,
    )  # fmt: skip
    await kube.patch(EPHEMERAL_RUNNER_SETS, ers, {"spec": {"replicas": None, "patchID": patch_id + 1}},
                     namespace=namespace)  # fmt: skip
    await eventually(lambda: set_settled(kube, namespace, ers, runners=0, gauged=gauged), "the runner to be gone")

    async def children_gone() -> bool:
        # A succeeded runner's pod and JIT Secret go with it, by the garbage collector (their owner reference).
        for resource in (resources.PODS, resources.SECRETS):
            with contextlib.suppress(NotFound):
                await kube.get(resource, name, namespace=namespace)
                return False
        return True

    # The garbage collector deletes them; on a control plane just started its informers may take a while to sync.
    await eventually(children_gone, "the runner's pod and JIT Secret to be gone", timeout=120)


AloneFactory = Callable[..., AbstractAsyncContextManager[tuple[ControllerHarness, KubeClient]]]


@pytest.fixture(name="alone")
def controllers_alone(
    cluster: TestCluster,
    namespace: str,
    controller_namespace: str,
    sim: SimulatedGitHub,
    crds_installed: list[str],
) -> AloneFactory:
    """``async with alone(**settings) as (env, client)``: the four controllers on a client of their own (of class
    ``client=``, default :class:`KubeClient`), so that its counts are theirs alone (the test acts as the listener
    and reads through the shared one); the scale set is cleaned up after the block."""

    @asynccontextmanager
    async def start(
        *, client: type[KubeClient] = KubeClient, **settings: Any
    ) -> AsyncIterator[tuple[ControllerHarness, KubeClient]]:
        async with _controllers(cluster, namespace, controller_namespace, sim, client, **settings) as started:
            yield started

    return start


@asynccontextmanager
async def _controllers(
    cluster: TestCluster,
    namespace: str,
    controller_namespace: str,
    sim: SimulatedGitHub,
    client: type[KubeClient],
    **settings: Any,
) -> AsyncIterator[tuple[ControllerHarness, KubeClient]]:
    async with client.from_kubeconfig(cluster.kubeconfig) as controllers:
        env = ControllerHarness(
            kube=controllers, namespace=namespace, controller_namespace=controller_namespace, sim=sim,
            config_url=sim.config_url(ORG), github_secret=SECRET_NAME, token=PAT, template=RUNNER_TEMPLATE,
            kinds=ALL_CONTROLLERS, defaults=DEFAULTS, client_options=CLIENT_OPTIONS,
        )  # fmt: skip
        await env.create_secret()
        await env.start(**settings)
        try:
            yield env, controllers
        finally:
            with contextlib.suppress(Exception):
                await _clean_up(env)
            await env.close()


async def running_scale_set(env: ControllerHarness, kube: KubeClient, **spec: Any) -> dict[str, Any]:
    """Create the scale set (with ``spec`` besides its bounds), report its listener polling, and wait until it is
    Running (read through ``kube``, not the controllers' client); returns its EphemeralRunnerSet."""
    await env.create_ars(minRunners=0, maxRunners=5, **spec)
    ers: dict[str, Any] = await eventually(env.ers, "the EphemeralRunnerSet")
    await env.report_listener_state(ListenerPhase.POLLING)
    await eventually(lambda: running_through(kube, env.namespace), "the scale set Running")
    return ers


async def one_jobs_requests(kube: KubeClient, env: ControllerHarness, controllers: KubeClient, **spec: Any
                            ) -> tuple[collections.Counter[tuple[str, str]], str]:  # fmt: skip
    """The controllers' requests for the second job of a running scale set (made with ``spec`` besides its
    bounds), and their breakdown as text."""
    ers = await running_scale_set(env, kube, **spec)
    gauged = None if env.settings.runner_counts_in_status else gauged_runners(env)
    # The first job of a set also tries its runner template (a dry run, once per 10 minutes): the
    # budget is a job's on a set already at work.
    await run_job(kube, env.namespace, ers["metadata"]["name"], patch_id=1, gauged=gauged)
    before = collections.Counter(controllers.request_counts)
    await run_job(kube, env.namespace, ers["metadata"]["name"], patch_id=3, gauged=gauged)
    spent = collections.Counter(controllers.request_counts)
    spent.subtract(before)
    breakdown = ", ".join(f"{verb} {what} {n}" for (verb, what), n in sorted(spent.items()) if n)
    print(f"one job's controller requests: {spent.total()} ({breakdown})")
    return spent, breakdown


async def test_with_counts_in_status_one_job_costs_the_controller_at_most_the_budget_and_the_counts_writes(
    kube: KubeClient, alone: AloneFactory
) -> None:
    async with alone(runner_counts_in_status=True) as (env, controllers):
        spent, breakdown = await one_jobs_requests(kube, env, controllers)
    status = spent[("patch", "ephemeralrunnersets/status")] + spent[("patch", "autoscalingrunnersets/status")]
    assert spent.total() - status <= JOB_BUDGET, f"one job cost {spent.total()} requests: {breakdown}"
    assert status <= COUNTS_BUDGET, f"one job cost {status} writes of the sets' status: {breakdown}"


async def test_at_the_defaults_one_job_costs_the_controller_at_most_ten_requests_and_is_counted_in_the_metrics_only(
    kube: KubeClient, alone: AloneFactory
) -> None:
    # The job's runner is waited for in the gauges, with neither status holding a count (one_jobs_requests).
    async with alone() as (env, controllers):
        assert env.settings.runner_counts_in_status is False
        spent, breakdown = await one_jobs_requests(kube, env, controllers)
        ers = await env.ers()
        assert ers is not None
        ars = await kube.get(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=env.namespace)
    assert spent.total() <= UNCOUNTED_BUDGET, f"one job cost {spent.total()} requests: {breakdown}"
    assert spent[("patch", "autoscalingrunnersets/status")] == 0, "the scale set's status does not follow its runners"
    assert not set(COUNT_FIELDS) & set(ers["status"]), "the set's status holds no counts"
    assert not {name for name, _ in RUNNER_COUNTS} & set(ars["status"]), "the scale set's status holds none"


PROXY_CREDENTIALS = "proxy-credentials"
PROXY = {
    # The simulated GitHub is on a loopback address, which is never proxied: the proxy is resolved on every pass,
    # its credentials put into the listener's and the runners' proxy Secrets, and no request goes through it.
    "http": {"url": "http://proxy.example:3128", "credentialSecretRef": PROXY_CREDENTIALS},
    "https": {"url": "http://proxy.example:3128", "credentialSecretRef": PROXY_CREDENTIALS},
    "noProxy": ["internal.example"],
}


async def test_behind_a_proxy_with_credentials_a_job_reads_no_secret_and_costs_what_it_costs_without(
    kube: KubeClient, alone: AloneFactory
) -> None:
    # Every pass of the runner set brings the runners' proxy Secret in line: it read the proxy's credentials
    # Secret and the runner proxy Secret from the API server each time, several passes per job (issue 30).
    async with alone() as (env, controllers):
        await env.create_secret(PROXY_CREDENTIALS, {"username": "proxy-user", "password": "proxy-pass"})
        spent, breakdown = await one_jobs_requests(kube, env, controllers, proxy=PROXY)
        ers = await env.ers()
        assert ers is not None
        name = runner_proxy_secret_name(ers["metadata"]["name"], env.namespace)
        runner_proxy = await kube.get(resources.SECRETS, name, namespace=env.namespace)
    assert spent[("get", "secrets")] == 0, f"a job of a scale set behind a proxy read Secrets: {breakdown}"
    assert spent.total() <= UNCOUNTED_BUDGET, f"one job cost {spent.total()} requests: {breakdown}"
    # (The runner proxy Secret was still made, with the credentials, when the set was set up.)
    assert "proxy-user" in base64.b64decode(runner_proxy["data"]["https_proxy"]).decode()


class SecretReadsByName(KubeClient):
    """A client that counts its GETs of Secrets by namespace and name."""

    @property
    def secret_gets(self) -> collections.Counter[tuple[str, str]]:
        counts: collections.Counter[tuple[str, str]] = self.__dict__.setdefault("_secret_gets", collections.Counter())
        return counts

    async def get(self, resource: Resource, name: str, **options: Any) -> dict[str, Any]:
        if resource == resources.SECRETS:
            self.secret_gets[(str(options.get("namespace")), name)] += 1
        return await super().get(resource, name, **options)


async def test_a_new_scale_set_reads_its_credentials_secret_once_while_it_is_set_up(
    kube: KubeClient, alone: AloneFactory
) -> None:
    # Each pass that sets a scale set up resolves its credentials (its registration, its runner set, its listener),
    # and until its listener existed nothing watched the Secret: each read it from the API server (issue 30).
    async with alone(client=SecretReadsByName) as (env, controllers):
        assert isinstance(controllers, SecretReadsByName)
        await running_scale_set(env, kube)  # the first scale set of the namespace: its Secrets are watched now
        await env.create_secret("second-secret")
        await env.create_ars("second", githubConfigSecret="second-secret", minRunners=0, maxRunners=5)
        await eventually(lambda: env.ers("second"), "the second scale set's EphemeralRunnerSet")
        await env.report_listener_state(ListenerPhase.POLLING, runner_set="second")
        await eventually(lambda: env.running("second"), "the second scale set Running")
        reads = controllers.secret_gets[(env.namespace, "second-secret")]
    print(f"GETs of the second scale set's Secret while it was set up: {reads}")
    assert reads == 1


async def test_setting_up_a_scale_set_never_has_its_own_status_write_refused(
    kube: KubeClient, alone: AloneFactory
) -> None:
    # Each pass of a new scale set writes it (the finalizer, the registration record, the URL labels) and then
    # its status: diffed against the pass's own read, the status write was refused (409) and followed by a GET.
    async with alone() as (env, controllers):
        await running_scale_set(env, kube)
        counts = collections.Counter(controllers.request_counts)
    breakdown = ", ".join(
        f"{verb} {what} {n}" for (verb, what), n in sorted(counts.items()) if "autoscalingrunnersets" in what
    )
    print(f"the scale set's own requests at set-up: {breakdown}")
    # A refused status write would add a read each; the finalizer is written against the cached copy (no read).
    assert counts[("get", "autoscalingrunnersets")] == 0, breakdown
    # Its own writes: the finalizer and the registration record (the pass carries on after each, issue 30). How
    # many status writes follow depends on when the runner set's and the listener's events arrive: not asserted.
    assert counts[("patch", "autoscalingrunnersets")] == 2, breakdown


async def test_a_new_scale_sets_first_job_reads_nothing_of_its_runner_set(
    kube: KubeClient, alone: AloneFactory
) -> None:
    # The first job asks whether finished runners were reaped under its patch (the finished-runner marker): the
    # set's finalizer write answered that at set-up, so no read is spent per set (issue 30).
    async with alone() as (env, controllers):
        ers = await running_scale_set(env, kube)  # (the harness reads the set through the controllers' client)
        before = collections.Counter(controllers.request_counts)
        await run_job(kube, env.namespace, ers["metadata"]["name"], patch_id=1, gauged=gauged_runners(env))
        spent = collections.Counter(controllers.request_counts)
    spent.subtract(before)
    assert spent[("get", "ephemeralrunnersets")] == 0, "the first job read its runner set"


async def running_through(kube: KubeClient, namespace: str) -> bool:
    """Whether the scale set is Running at its generation, read through ``kube`` (not the controllers' client)."""
    obj = await kube.get(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=namespace)
    status = obj.get("status") or {}
    return status.get("phase") == "Running" and status.get("observedGeneration") == obj["metadata"]["generation"]


class SucceededAnswerHeld(KubeClient):
    """A client whose answer to a runner's ``Succeeded`` status write is held back (the write is applied) until
    :attr:`release_when` holds: the watch event of that write then reaches the set's pass before the runner's own
    pass has the answer, as under load."""

    release_when: Callable[[], Awaitable[bool]] | None = None

    async def patch(self, resource: Resource, name: str, body: Any, **options: Any) -> dict[str, Any]:
        stored = await super().patch(resource, name, body, **options)
        status = body.get("status") if isinstance(body, dict) else None  # a JSON patch is a list
        succeeded = isinstance(status, dict) and status.get("phase") == EphemeralRunnerPhase.SUCCEEDED
        if resource == EPHEMERAL_RUNNERS and options.get("subresource") == "status" and succeeded:
            release_when = self.release_when
            if release_when is not None:
                await eventually(release_when, "the set's pass after the runner's Succeeded", timeout=60)
        return stored


async def test_a_succeeded_runner_is_deleted_once_when_the_set_sees_its_succeeded_before_its_controller_deletes_it(
    kube: KubeClient, alone: AloneFactory
) -> None:
    async with alone(client=SucceededAnswerHeld) as (env, controllers):
        assert isinstance(controllers, SucceededAnswerHeld)
        ers = await running_scale_set(env, kube)
        name = ers["metadata"]["name"]
        gauged = gauged_runners(env)
        await run_job(kube, env.namespace, name, patch_id=1, gauged=gauged)  # the set's first job: its dry run

        async def set_acted_on_it() -> bool:
            # Either the set deleted the runner itself, or its pass carried the finished job into its status.
            runners = (await kube.list(EPHEMERAL_RUNNERS, namespace=env.namespace)).items
            if any(r["metadata"].get("deletionTimestamp") for r in runners):
                return True
            status = (await kube.get(EPHEMERAL_RUNNER_SETS, name, namespace=env.namespace)).get("status") or {}
            return any(job.get("jobId") == "job-3" for job in status.get("recentJobs") or ())

        controllers.release_when = set_acted_on_it
        before = collections.Counter(controllers.request_counts)
        await run_job(kube, env.namespace, name, patch_id=3, gauged=gauged, timeline=True)
        spent = collections.Counter(controllers.request_counts)
        spent.subtract(before)
    deletes = {what: n for (verb, what), n in spent.items() if verb.startswith("delete") and n}
    assert deletes == {"ephemeralrunners": 1}, f"the succeeded runner cost more than its own DELETE: {deletes}"

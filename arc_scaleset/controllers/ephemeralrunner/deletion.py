"""Deleting an EphemeralRunner (docs/controllers.md): unregister, delete what it owns, drop the finalizers.

Order and outcomes:

1. registration finalizer present: ``RemoveRunner(runnerId)``. The runner ID is the status's, or -- when the
   status never got it (a pass ended between registering and writing the status) -- the JIT Secret's, so a
   registration is not leaked by a badly timed deletion. No ID anywhere (a Secret under the runner's name that
   the runner does not control is not read: a Warning ``ObjectInTheWay`` Event names it, and the deletion goes
   on), or the service no longer knows the runner: nothing to remove. ``JobStillRunning``: the runner is busy;
   come back in 30 s. Any other error propagates (workqueue backoff), among them a 404 or 403 from GitHub's
   authentication step, which says nothing about the runner
   (:class:`~arc_scaleset.controllers.errors.GitHubAuthenticationStepFailed`, with a Warning Event): the runner
   is not deleted without GitHub's answer for it. Skipped when this process's EphemeralRunnerSet saw GitHub
   confirm this very registration gone (:class:`~arc_scaleset.controllers.handoff.RemovedRegistrations`): the
   usual scale-down, where ARC asks GitHub twice per runner.
2. delete the pod and the JIT Secret (not waiting for them; both are also garbage-collected), only those the
   runner controls and each under its UID as a precondition (docs/controllers.md, "Objects in the way"): the
   pod as cached; the Secret under the UID this process created or read it with, else (after a restart) it
   is left to the garbage collector. In
   kubernetes mode the container-hook pods and Secrets labelled ``runner-pod=<name>``. Not the pod and the
   Secret the EphemeralRunnerSet deleted in a batch (:class:`~arc_scaleset.controllers.handoff.DeletedChildren`):
   then this path costs one write, step 3; while the batch is still deleting them, come back in 0.5 s. Nor
   those of a runner that ``Succeeded``: its pod has ended and its JIT config is spent, and the garbage
   collector deletes both once the runner is gone (their controller reference): two requests per job fewer
   (issue 30);
3. remove both finalizers in one write: a JSON patch that tests the finalizer list the cached runner shows,
   so no read is needed (a list changed meanwhile fails the test; then read and write again). Removing the
   registration finalizer together with the main one is safe: if the pass dies before this write, the next
   pass asks GitHub again and gets "not found".
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import (
    CONTAINER_HOOKS_ENV,
    EPHEMERAL_RUNNER_FINALIZER,
    EPHEMERAL_RUNNER_REGISTRATION_FINALIZER,
    LABEL_RUNNER_POD,
    RUNNER_CONTAINER_NAME,
    EphemeralRunnerPhase,
)
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.builders import secret_runner_id
from arc_scaleset.controllers.errors import ConfigurationError, ObjectInTheWay, in_the_way_message
from arc_scaleset.controllers.handoff import BatchDeletion
from arc_scaleset.controllers.runner_github import (
    Removal,
    RunnerClients,
    client_for_runner_spec,
    remove_registration,
)
from arc_scaleset.kube.client import KubeClient, Preconditions
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import Conflict, Invalid, NotFound
from arc_scaleset.kube.finalizers import patch_out_finalizers
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.resources import PODS, SECRETS, Resource
from arc_scaleset.kube.retry import update_with_retry
from arc_scaleset.kube.views import ObjectView

JOB_STILL_RUNNING_REQUEUE: Final = 30.0
BATCH_WAIT: Final = 0.5
"""Seconds before a runner whose pod or Secret the set's batch is deleting right now is looked at again."""
_FINALIZERS: Final = (EPHEMERAL_RUNNER_FINALIZER, EPHEMERAL_RUNNER_REGISTRATION_FINALIZER)


def _has_container_hooks(er: Object) -> bool:
    container = EphemeralRunnerView(er).container(RUNNER_CONTAINER_NAME)
    return container is not None and any(env.get("name") == CONTAINER_HOOKS_ENV for env in container.get("env") or ())


async def cleanup_runner_resources(
    kube: KubeClient,
    er: Object,
    *,
    pod: Object | None,
    secret_uid: str = "",
    pod_batched: bool = False,
    secret_batched: bool = False,
) -> None:
    """Delete the runner's pod (``pod`` as cached; ``None``: none) and JIT Secret (``secret_uid``: its UID as this
    process created or read it; ``""``: unknown, left to the garbage collector), and its hook objects; not the
    pod or the Secret a batch of the set deleted (``pod_batched``, ``secret_batched``). Each is deleted only
    when it is the runner's own (:mod:`.ownership`), under its UID: never another object under the name."""
    view = ObjectView(er)
    name, namespace = view.name, view.namespace
    own_pod = pod if pod is not None and is_controlled_by(pod, er) else None
    if own_pod is not None and not ObjectView(own_pod).is_deleting and not pod_batched:
        await _delete_own(kube, PODS, name, namespace, ObjectView(own_pod).uid)
    if secret_uid and not secret_batched:
        await _delete_own(kube, SECRETS, name, namespace, secret_uid)
    if _has_container_hooks(er):
        selector = f"{LABEL_RUNNER_POD}={name}"
        for resource in (PODS, SECRETS):
            listed = await kube.list(resource, namespace=namespace, label_selector=selector)
            for item in map(ObjectView, listed.items):
                if not item.is_deleting:
                    await kube.delete(resource, item.name, namespace=namespace, missing_ok=True)


async def _delete_own(kube: KubeClient, resource: Resource, name: str, namespace: str, uid: str) -> None:
    """Delete ``name`` only while it is the object of ``uid``: gone, or replaced by another, is fine."""
    with contextlib.suppress(Conflict):
        await kube.delete(resource, name, namespace=namespace, preconditions=Preconditions(uid=uid), missing_ok=True)


async def _registered_runner_id(ctx: ControllerContext, er: Object) -> int:
    """The runner ID of the status, else of the runner's own JIT Secret (one that is not its own is named in a
    Warning Event, and neither read nor deleted: :mod:`.ownership`)."""
    view = EphemeralRunnerView(er)
    if view.runner_id:
        return view.runner_id
    try:
        secret = await ctx.kube.get(SECRETS, view.name, namespace=view.namespace)
    except NotFound:
        return 0
    if not is_controlled_by(secret, er):
        note = in_the_way_message("Secret", secret, er)
        await ctx.events.event(er, type="Warning", reason=ObjectInTheWay.reason, note=note, action="RemoveRunner")
        return 0
    return secret_runner_id(secret) or 0


async def finalize_runner(
    ctx: ControllerContext, er: Object, *, clients: RunnerClients | None = None, secret_uid: str = ""
) -> Result:
    """One pass of the deletion path; see the module docstring. ``clients``: the reconciler's
    :class:`RunnerClients`, so the runners of a scale-down share one read of their GitHub Secret; ``secret_uid``:
    the UID of the runner's JIT Secret as this process knows it (:func:`cleanup_runner_resources`)."""
    view = EphemeralRunnerView(er)
    finalizers = view.finalizers
    if not any(f in finalizers for f in _FINALIZERS):
        return Result()
    name, namespace = view.name, view.namespace
    if any(ctx.deleted_children.pending(view.uid, resource.plural) for resource in (PODS, SECRETS)):
        return Result(requeue_after=BATCH_WAIT)  # the set's batch is deleting them: nothing to do meanwhile
    registered = EPHEMERAL_RUNNER_REGISTRATION_FINALIZER in finalizers
    if registered and await _unregister(ctx, er, clients=clients) is Removal.BUSY:
        return Result(requeue_after=JOB_STILL_RUNNING_REQUEUE)
    pod_batched, secret_batched = (
        ctx.deleted_children.state(view.uid, resource.plural) is BatchDeletion.DELETED for resource in (PODS, SECRETS)
    )
    collected = view.phase == EphemeralRunnerPhase.SUCCEEDED  # the garbage collector's (module docstring, step 2)
    await cleanup_runner_resources(
        ctx.kube, er, pod=ctx.cache(PODS).get(namespace, name), secret_uid=secret_uid,
        pod_batched=pod_batched or collected, secret_batched=secret_batched or collected,
    )  # fmt: skip
    try:
        await patch_out_finalizers(ctx.kube, EPHEMERAL_RUNNERS, er, _FINALIZERS)
    except Invalid:
        # The cached finalizer list is behind the stored one (the test operation failed): read, then write.
        with contextlib.suppress(NotFound):
            await update_with_retry(
                ctx.kube, EPHEMERAL_RUNNERS, name, namespace=namespace, mutate=_drop_finalizers, clock=ctx.clock
            )
    return Result()


async def _unregister(ctx: ControllerContext, er: Object, *, clients: RunnerClients | None) -> Removal | None:
    """Remove the runner's registration from GitHub (step 1); ``None`` when there was none to remove."""
    view = EphemeralRunnerView(er)
    runner_id = await _registered_runner_id(ctx, er)
    # The set removes an idle runner from GitHub before it deletes it, and records the removals GitHub
    # confirmed. Asking again could only answer "not found": a removed registration takes no job and
    # its ID is never handed out again. Only that exact registration is skipped: a runner the set found
    # busy, whose removal failed, or that registered again (another ID) is removed here as before.
    if not runner_id or ctx.removed_registrations.take(view.uid, runner_id):
        return None
    try:
        if clients is not None:
            client = await clients.client_for(namespace=view.namespace, spec=view.spec)
        else:
            client = await client_for_runner_spec(ctx.github, namespace=view.namespace, spec=view.spec)
        return await remove_registration(client, runner_id)
    except ConfigurationError as exc:
        # Bad input, or GitHub refused the authentication step (no word on the runner): the runner and
        # its finalizers stay until GitHub answers for it.
        await ctx.events.event(
            er,
            type="Warning",
            reason=exc.reason,
            action="RemoveRunner",
            note=f"cannot remove runner {runner_id} from GitHub: {exc.message}",
        )
        raise


def _drop_finalizers(current: dict[str, Any]) -> dict[str, Any] | None:
    current_meta = current.setdefault("metadata", {})
    present = list(current_meta.get("finalizers") or [])
    kept = [f for f in present if f not in _FINALIZERS]
    if kept == present:
        return None
    current_meta["finalizers"] = kept
    return current

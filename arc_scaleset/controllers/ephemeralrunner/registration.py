"""The registration phase of an EphemeralRunner pass: its runner ID, from the JIT Secret or a new registration.

A runner without a pod or without a runner ID in its status (or whose JIT Secret, sent with its pod, is not
confirmed) gets its registration here. The JIT config comes from GitHub (``generatejitconfig``, runner name =
the EphemeralRunner's name) and is stored in a Secret of the same name. A runner's first pass in this process
registers without reading the Secret first (see :mod:`.memory`; RunnerExists makes it read the Secret). A Secret
under the runner's name that the runner does not control is in the way (:mod:`.ownership`). A name
collision (RunnerExists without a usable Secret): a registration of this scale set is removed and registered
again; one of another scale set deletes this runner (docs/controllers.md).

For a fresh runner without a pod (no phase, no failures), the new Secret is not created here: it is handed to
the pod step in :class:`Registration`, which creates it together with the pod.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.controllers.ephemeralrunner.builders import desired_jit_secret, runner_work_folder, secret_runner_id
from arc_scaleset.controllers.ephemeralrunner.scope import RunnerPass
from arc_scaleset.controllers.metrics import DeletedReason
from arc_scaleset.controllers.runner_github import remove_registration
from arc_scaleset.github import ActionsClient, RunnerExists
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import AlreadyExists, Conflict, NotFound
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)

NAME_COLLISION_REQUEUE: Final = 1.0


@dataclass(frozen=True)
class Registration:
    """The runner's registration: its ID, and the JIT Secret of a fresh registration that the pod step is to
    create together with the pod (``None``: the Secret exists)."""

    runner_id: int
    new_secret: dict[str, Any] | None = None


async def register(scope: RunnerPass) -> Result | None:
    """The phase: record the registration in the scope (and its ID among the status changes when it is new to
    the status); a :class:`Result` when the pass must end here (a collision, an unusable Secret)."""
    if scope.pod is not None and scope.runner_id and not scope.slot.secret_unconfirmed:
        return None
    ensured = await _ensure_jit_secret(scope)
    if isinstance(ensured, Result):
        return ensured
    scope.new_secret = ensured.new_secret
    if scope.runner_id != ensured.runner_id:
        scope.runner_id = ensured.runner_id
        scope.changes.update(runnerId=ensured.runner_id, runnerName=scope.name)
    return None


async def _ensure_jit_secret(scope: RunnerPass) -> Registration | Result:
    """The registration the JIT Secret records, registering the runner first when there is no Secret.

    The first attempt in this process registers without reading the Secret: a Secret can only exist if the
    runner was registered before, and then the service answers RunnerExists and we read it.
    """
    first = scope.slot.first_registration()
    if not first:
        existing = await _read_secret(scope)
        if existing is not None:
            return existing
    client = await scope.github()
    scale_set_id = scope.runner.runner_scale_set_id
    try:
        jit = await client.generate_jit_runner_config(
            scale_set_id, name=scope.name, work_folder=runner_work_folder(scope.runner.raw)
        )
    except RunnerExists:
        if first:
            # Registered by an earlier process, which may have stored the config before it stopped.
            existing = await _read_secret(scope)
            if existing is not None:
                return existing
        return await _name_collision(scope, client, scale_set_id)
    secret_body = desired_jit_secret(
        scope.runner.raw,
        encoded_jit_config=jit.encoded_jit_config,
        runner_id=jit.runner.id,
        runner_name=jit.runner.name or scope.name,
        scale_set_id=scale_set_id,
    )
    if scope.pod is None and not scope.runner.phase and not scope.runner.failures:
        return Registration(jit.runner.id, new_secret=secret_body)
    try:
        created = await scope.ctx.kube.create(SECRETS, secret_body)
    except AlreadyExists:
        # A leftover from an earlier registration (only this runner's reconcile writes this name, one at a
        # time), or somebody else's Secret in the way: the next pass reads it and tells which. Give back the
        # registration made just now.
        await scope.best_effort_remove(jit.runner.id)
        return Result(requeue_after=NAME_COLLISION_REQUEUE)
    scope.slot.secret_uid = ObjectView(created).uid
    return Registration(jit.runner.id)


async def _read_secret(scope: RunnerPass) -> Registration | Result | None:
    """The registration the JIT Secret records; ``None`` without a Secret; a requeue after deleting an
    unusable one. A Secret the runner does not control is in the way (:mod:`.ownership`): never read for a
    runner ID, never deleted; :class:`~arc_scaleset.controllers.errors.ObjectInTheWay` is raised."""
    try:
        secret = await scope.ctx.kube.get(SECRETS, scope.name, namespace=scope.namespace)
    except NotFound:
        return None
    if not is_controlled_by(secret, scope.runner.raw):
        await scope.in_the_way("Secret", secret)
    uid = ObjectView(secret).uid
    scope.slot.secret_uid = uid
    runner_id = secret_runner_id(secret)
    if runner_id is not None:
        return Registration(runner_id)
    log.warning("JIT secret %s has no usable runnerId; deleting it to register again", scope.request)
    with contextlib.suppress(Conflict):  # replaced meanwhile: that one is not ours to delete
        await scope.ctx.kube.delete(
            SECRETS, scope.name, namespace=scope.namespace, preconditions=Preconditions(uid=uid), missing_ok=True
        )
    scope.slot.secret_uid = ""
    return Result(requeue_after=NAME_COLLISION_REQUEUE)


async def _name_collision(scope: RunnerPass, client: ActionsClient, scale_set_id: int) -> Result:
    existing = await client.get_runner_by_name(scope.name)
    if existing is None:
        return Result(requeue_after=NAME_COLLISION_REQUEUE)
    if existing.runner_scale_set_id == scale_set_id:
        # Our own earlier registration whose Secret was lost: remove it and register again.
        await remove_registration(client, existing.id)
        return Result(requeue_after=NAME_COLLISION_REQUEUE)
    await scope.event(
        "Warning",
        "RunnerNameTaken",
        f"a runner named {scope.name} is registered in another scale set ({existing.runner_scale_set_id});"
        " deleting this EphemeralRunner",
    )
    await scope.delete_runner(DeletedReason.NAME_TAKEN)
    return Result()

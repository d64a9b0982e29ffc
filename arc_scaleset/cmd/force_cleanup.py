"""``arc-scaleset force-cleanup``: release a scale set's objects when no controller will (ARC #3282).

When the controller was uninstalled before its scale sets (or can no longer run), ``helm uninstall`` leaves
AutoscalingRunnerSets, their runners and the chart's Secret, Role, RoleBinding and ServiceAccounts stuck on
finalizers, and users remove them by hand. This command does it in one step, for the scale set named (or
every one in the namespace):

1. delete its EphemeralRunners, EphemeralRunnerSets, AutoscalingListener (:func:`listeners_to_release`) and
   the AutoscalingRunnerSet itself, in that order,
   and remove this project's finalizers from each (their pods, Secrets and listener objects are owned by them
   and go with them through Kubernetes garbage collection);
2. remove the ``cleanup-protection`` finalizer from the objects the set's ``cleanup-*`` annotations name
   (they go away if they were being deleted, as after ``helm uninstall``; otherwise Helm still owns them).

It does not talk to GitHub: the scale set stays registered there (its ID is printed) and so do runners that
were registered (GitHub removes runners that stay offline after about a day). Run it only when no controller
manages the scale set: a running controller does all of this itself, GitHub included. ``--dry-run`` prints
what would be done and changes nothing. Finalizers are removed with a patch that tests the list it read, so
a concurrent change is refused, never overwritten (run the command again).

Exit codes: 0 done (or nothing to do); 1 the scale set does not exist, or the API refused a step (the message
says which); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    ANNOTATION_AUTOSCALING_RUNNER_SET_UID,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    AUTOSCALING_LISTENER_FINALIZER,
    AUTOSCALING_RUNNER_SET_FINALIZER,
    CLEANUP_PROTECTION_FINALIZER,
    EPHEMERAL_RUNNER_FINALIZER,
    EPHEMERAL_RUNNER_REGISTRATION_FINALIZER,
    EPHEMERAL_RUNNER_SET_FINALIZER,
)
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalingrunnerset.deletion import cleanup_targets
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import KubeconfigError, KubeError, NotFound
from arc_scaleset.kube.finalizers import patch_out_finalizers
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.views import ObjectView

OUR_FINALIZERS: Final = frozenset(
    {
        AUTOSCALING_RUNNER_SET_FINALIZER,
        EPHEMERAL_RUNNER_SET_FINALIZER,
        EPHEMERAL_RUNNER_FINALIZER,
        EPHEMERAL_RUNNER_REGISTRATION_FINALIZER,
        AUTOSCALING_LISTENER_FINALIZER,
    }
)

Say = Callable[[str], None]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", "-n", required=True, help="the scale sets' namespace")
    parser.add_argument("--name", help="one AutoscalingRunnerSet (default: every one in the namespace)")
    parser.add_argument(
        "--controller-namespace",
        help="where the AutoscalingListeners live (default: search every namespace, which needs cluster-wide list)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    try:
        kube = KubeClient.from_environment(args.kubeconfig)
    except (KubeconfigError, OSError) as exc:
        print(f"cannot use the Kubernetes credentials: {exc}")
        return 1
    async with kube:
        try:
            await force_cleanup(
                kube,
                args.namespace,
                name=args.name,
                controller_namespace=args.controller_namespace,
                dry_run=args.dry_run,
                say=print,
            )
        except LookupError as exc:
            print(exc.args[0])
            return 1
        except KubeError as exc:
            print(f"stopped: {exc} (run the command again once the cause is fixed)")
            return 1
    return 0


async def force_cleanup(
    kube: KubeClient,
    namespace: str,
    *,
    name: str | None = None,
    controller_namespace: str | None = None,
    dry_run: bool = False,
    say: Say = print,
) -> None:
    """Release the scale set ``namespace/name`` (every one in ``namespace`` when ``name`` is None); see the
    module docstring. Raises :class:`LookupError` when ``name`` does not exist, :class:`KubeError` when the
    API refuses a step."""
    if name is not None:
        try:
            sets = [await kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)]
        except NotFound:
            raise LookupError(f"AutoscalingRunnerSet {namespace}/{name} not found") from None
    else:
        sets = (await kube.list(AUTOSCALING_RUNNER_SETS, namespace=namespace)).items
    if not sets:
        say(f"no AutoscalingRunnerSet in namespace {namespace}: nothing to do")
        return
    listeners = (await kube.list(AUTOSCALING_LISTENERS, namespace=controller_namespace)).items
    runner_sets = (await kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace)).items
    runners = (await kube.list(EPHEMERAL_RUNNERS, namespace=namespace)).items
    for ars in sets:
        await _release_scale_set(
            kube,
            ars,
            listeners,
            runner_sets,
            runners,
            controller_namespace=controller_namespace,
            dry_run=dry_run,
            say=say,
        )


async def _release_scale_set(
    kube: KubeClient,
    ars: Mapping[str, Any],
    listeners: Sequence[Mapping[str, Any]],
    runner_sets: Sequence[Mapping[str, Any]],
    runners: Sequence[Mapping[str, Any]],
    *,
    controller_namespace: str | None,
    dry_run: bool,
    say: Say,
) -> None:
    view = ObjectView(ars)
    namespace, name = view.namespace, view.name
    own_sets = [s for s in runner_sets if ObjectView(s).is_owned_by(view.uid)]
    set_uids = {ObjectView(s).uid for s in own_sets}
    own_runners = [r for r in runners if any(ObjectView(r).is_owned_by(uid) for uid in set_uids)]
    own_listeners, listener_note = listeners_to_release(ars, listeners, controller_namespace=controller_namespace)
    say(f"AutoscalingRunnerSet {namespace}/{name}:")
    if listener_note:
        say(f"  not done: {listener_note}")
    for resource, objects in (
        (EPHEMERAL_RUNNERS, own_runners),
        (EPHEMERAL_RUNNER_SETS, own_sets),
        (AUTOSCALING_LISTENERS, own_listeners),
        (AUTOSCALING_RUNNER_SETS, [ars]),
    ):
        for obj in objects:
            await _release(kube, resource, obj, OUR_FINALIZERS, delete=True, dry_run=dry_run, say=say)
    for resource, target in cleanup_targets(view.annotations):
        try:
            protected = await kube.get(resource, target, namespace=namespace)
        except NotFound:
            continue
        await _release(
            kube, resource, protected, {CLEANUP_PROTECTION_FINALIZER}, delete=False, dry_run=dry_run, say=say
        )
    scale_set_id = view.annotation(ANNOTATION_RUNNER_SCALE_SET_ID)
    if scale_set_id:
        say(
            f"  not done: scale set {scale_set_id} is still registered on GitHub (delete it in the repository,"
            " organization or enterprise settings if it is not coming back)"
        )


def listeners_to_release(
    scale_set: Mapping[str, Any], listeners: Sequence[Mapping[str, Any]], *, controller_namespace: str | None
) -> tuple[list[Mapping[str, Any]], str]:
    """The AutoscalingListeners of ``scale_set`` to delete and release, and a note when some are left alone.

    Anybody who may create AutoscalingListeners somewhere can write one whose spec names any scale set, so a
    spec naming it is not enough (docs/controllers.md, "Tenancy"; the same rule as ``status``):

    1. a listener counts only when its spec names the scale set and its
       ``actions.github.com/autoscaling-runner-set-uid`` annotation is the scale set's UID, or it has none (made
       by ARC's controller, or by a release of this one before the annotation);
    2. with ``--controller-namespace``, only a listener there counts;
    3. without it, when counted listeners are in more than one namespace, none is released: which one is the
       controller's cannot be told, and the note says to pass ``--controller-namespace``.
    """
    owner = ObjectView(scale_set)
    counted = []
    for al in listeners:
        listener = AutoscalingListenerView(al)
        uid = listener.annotation(ANNOTATION_AUTOSCALING_RUNNER_SET_UID)
        if (listener.scale_set_namespace, listener.scale_set_name) != (owner.namespace, owner.name):
            continue
        if uid not in ("", owner.uid):
            continue
        if controller_namespace is not None and listener.namespace != controller_namespace:
            continue
        counted.append(al)
    namespaces = sorted({ObjectView(al).namespace for al in counted})
    if len(namespaces) > 1:
        return [], (
            f"AutoscalingListeners in namespaces {', '.join(namespaces)} all claim this scale set: none released"
            " (--controller-namespace says which namespace is the controller's)"
        )
    return counted, ""


async def _release(
    kube: KubeClient,
    resource: Resource,
    obj: Mapping[str, Any],
    finalizers: Collection[str],
    *,
    delete: bool,
    dry_run: bool,
    say: Say,
) -> None:
    """Delete ``obj`` first when ``delete`` (unless it is being deleted already), then remove those of
    ``finalizers`` it holds."""
    view = ObjectView(obj)
    label = f"{resource.kind} {view.namespace}/{view.name}"
    if delete and not view.is_deleting:
        if not dry_run:
            await kube.delete(resource, view.name, namespace=view.namespace, missing_ok=True)
        say(f"  {'would delete' if dry_run else 'deleted'} {label}")
    held = sorted(f for f in set(view.finalizers) if f in finalizers)
    if not held:
        return
    if not dry_run:
        await patch_out_finalizers(kube, resource, obj, held)
    say(f"  {'would remove' if dry_run else 'removed'} finalizers {', '.join(held)} from {label}")

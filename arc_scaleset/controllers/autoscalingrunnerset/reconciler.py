"""The AutoscalingRunnerSet reconciler: a scale set on GitHub, its EphemeralRunnerSet, its listener.

A thin shell around the pure decisions of :mod:`.desired`, :mod:`.decisions` and :mod:`.status`, in
Cluster API's shape:
gather the object from the cache, run ordered phases until one acts (each write brings the key back
through a watch), and write the status once at the end of the pass, whatever happened.

Phases (docs/controllers.md; the revision design: docs/revisions.md):

1. deleting → :mod:`.deletion`;
2. the version gate (a mismatched ``app.kubernetes.io/version`` is reported, never deleted);
3. the finalizer;
4. the config URL (and the URL labels); the scale set registered or reused by name in the runner group;
5. the scale set verified on GitHub by ID on a spec change, when the listener is missing, when a registration
   annotation (runner group, scale-set name) is missing or stale, at once when the listener reports that GitHub
   no longer knows the scale set (:mod:`.listener_report`), and every ``scale_set_verify_interval``: a
   definitive 404 re-registers it (the new ID flows to the runner set as a revision bump); any other error
   is retried, never a re-registration; a found set has its group, name and labels brought in line;
6. the EphemeralRunnerSet: the scale set's sets are found by owner reference, whatever their names
   (:mod:`arc_scaleset.api.runner_sets`: a scale set moved from ARC has ARC's generated names, possibly
   several sets); sets superseded by the current one are deleted (drained: busy runners finish); the current
   one is created when there is none (the ARS's name, revision 0), its runner spec patched with a revision
   bump on semantic drift, its metadata merged, or torn down when Outdated at its current revision; a set ARC
   made before ``spec.patchID`` existed gets ``patchID: 0`` in the same patch (:mod:`.adoption`);
7. the AutoscalingListener, pointed at the current set: stale ones (another name) deleted, created when
   missing, deleted and recreated when a listener-relevant field changed or ARC's controller made it; ARC's
   listener only once a dry run shows the current set takes the new listener's writes (else
   ``AdoptionRefused``, and ARC's listener keeps running);
8. done: ``Running``, ``observedGeneration`` = generation; ``Ready`` and ``Degraded`` also say what the
   listener's own conditions say (a listener without a session makes the scale set not ``Ready``).

Bad input (secret, URL, TLS, runner group, vault) ends the pass with a ``Degraded`` condition and a Warning
Event, and the key is retried with the workqueue's backoff; nothing is deleted because of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pydantic

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS, AutoscalingRunnerSet
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    ANNOTATION_RUNNER_SPEC_HASH,
    AUTOSCALING_RUNNER_SET_FINALIZER,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LABEL_VERSION,
)
from arc_scaleset.api.labels import github_url_labels
from arc_scaleset.api.runner_sets import ScaleSetRunnerSets, runner_sets_of, sort_runner_sets
from arc_scaleset.api.versions import ARC_CHART_VERSIONS, accepts_version_label
from arc_scaleset.api.views import AutoscalingListenerView, AutoscalingRunnerSetView
from arc_scaleset.controllers.autoscalingrunnerset import deletion
from arc_scaleset.controllers.autoscalingrunnerset.adoption import (
    AdoptionRefused,
    arcs_live_listeners,
    refusal_message,
    writability_probe,
)
from arc_scaleset.controllers.autoscalingrunnerset.bounds import check_runner_bounds
from arc_scaleset.controllers.autoscalingrunnerset.decisions import (
    ErsAction,
    listener_differences,
    plan_ephemeral_runner_set,
    revisions_of,
)
from arc_scaleset.controllers.autoscalingrunnerset.desired import (
    desired_autoscaling_listener,
    desired_ephemeral_runner_set,
    listener_name_of,
    scale_set_id_of,
)
from arc_scaleset.controllers.autoscalingrunnerset.listener_report import listener_problems, scale_set_gone_report
from arc_scaleset.controllers.autoscalingrunnerset.ownership import (
    listener_is_own,
    listener_name_conflict,
    runner_set_conflict,
)
from arc_scaleset.controllers.autoscalingrunnerset.registration import (
    register_scale_set,
    registration_patch,
    registration_record_stale,
    scale_set_client,
    sync_scale_set,
    url_labels_patch,
)
from arc_scaleset.controllers.autoscalingrunnerset.status import (
    ReconcileReport,
    derive_status,
    runner_set_problem,
    scale_set_runner_counts,
    status_patch,
)
from arc_scaleset.controllers.autoscalingrunnerset.template_size import check_template_size
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.errors import (
    ConfigurationError,
    GitHubAuthenticationStepFailed,
    InvalidSpec,
    UnsupportedVersion,
)
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.github import (
    ActionsClient,
    ActionsError,
    AuthenticationStepFailed,
    NotFound,
    RateLimited,
    Unauthorized,
    is_transient,
)
from arc_scaleset.kube.client import Preconditions
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import AlreadyExists, BadRequest, Conflict, Invalid
from arc_scaleset.kube.errors import NotFound as KubeNotFound
from arc_scaleset.kube.failures import pass_failure
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import Owner
from arc_scaleset.kube.retry import retry_on_conflict
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME = "autoscalingrunnerset"
WAIT_REQUEUE_SECONDS = 5.0
CONFLICT_REQUEUE_SECONDS = 0.5


def listener_to_scale_set(obj: Object) -> Iterable[Request]:
    """An AutoscalingListener concerns the AutoscalingRunnerSet its spec names."""
    listener = AutoscalingListenerView(obj)
    namespace, name = listener.scale_set_namespace, listener.scale_set_name
    return (Request(namespace, name),) if namespace and name else ()


@dataclass
class _Pass:
    """The scope of one reconcile: the object as read, its parsed form, what the pass found."""

    obj: Object
    ars: AutoscalingRunnerSet
    report: ReconcileReport
    verified: bool = False
    runner_set_name: str = ""
    """The scale set's current EphemeralRunnerSet, once the pass found it in line (the listener's target)."""
    gone_report: dt.datetime | None = None
    """When the listener reported the scale set gone on GitHub, if that report is why this pass verifies it."""


class AutoscalingRunnerSetReconciler:
    """Reconciles AutoscalingRunnerSets; build the controller with :meth:`controller`."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        self.runner_sets = ctx.cache(EPHEMERAL_RUNNER_SETS)
        self.listeners = ctx.cache(AUTOSCALING_LISTENERS)
        # When each scale set was last confirmed on GitHub: (monotonic time, scale set ID).
        self._verified: dict[tuple[str, str], tuple[float, int]] = {}
        # The listener's latest "scale set not found" report each scale set was verified for (its time).
        self._gone_reports: dict[tuple[str, str], dt.datetime] = {}
        # The last status write of each scale set: the resourceVersion it was diffed against, and the object
        # the server returned (see _write_status).
        self._status_written: dict[tuple[str, str], tuple[str, Object]] = {}

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        """The controller running this reconciler; ``rate_limiter``: its workqueue's (``None``: the default)."""
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_RUNNER_SETS,
            self.reconcile,
            owns=[EPHEMERAL_RUNNER_SETS],
            watches=[(AUTOSCALING_LISTENERS, listener_to_scale_set)],
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
            failure_reporter=ReconcileFailureReporter(self.ctx, AUTOSCALING_RUNNER_SETS),
            # Bad input and GitHub errors have their own condition and Event (see reconcile).
            self_reported=(ConfigurationError, ActionsError),
        )

    # -- the pass -------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        obj = self.scale_sets.get(request.namespace, request.name)
        if obj is None:
            self._verified.pop((request.namespace, request.name), None)
            self._gone_reports.pop((request.namespace, request.name), None)
            self._status_written.pop((request.namespace, request.name), None)
            return Result()
        view = AutoscalingRunnerSetView(obj)
        if view.is_deleting:
            self._verified.pop((request.namespace, request.name), None)
            self._gone_reports.pop((request.namespace, request.name), None)
            self._status_written.pop((request.namespace, request.name), None)
            return await deletion.reconcile_deletion(self.ctx, obj)

        report = ReconcileReport(
            generation=view.generation,
            observed_generation=view.observed_generation,
            stored_phase=view.phase,
            runner_counts=scale_set_runner_counts(self._runner_sets_of(obj).all()),
        )
        try:
            try:
                ars = AutoscalingRunnerSet.from_object(obj)
            except pydantic.ValidationError as exc:
                raise InvalidSpec(f"the AutoscalingRunnerSet cannot be read: {_first_error(exc)}") from None
            self._check_version(ars)
            check_runner_bounds(ars, ceiling=self.ctx.settings.max_runners_ceiling)
            check_template_size(obj, limit=self.ctx.settings.max_runner_template_bytes)
            if not has_finalizer(obj, AUTOSCALING_RUNNER_SET_FINALIZER):
                await add_finalizer(self.ctx.kube, AUTOSCALING_RUNNER_SETS, obj, AUTOSCALING_RUNNER_SET_FINALIZER)
                report.progress = ("AddingFinalizer", "adding the finalizer")
                return Result()
            return await self._converge(_Pass(obj, ars, report))
        except ConfigurationError as exc:
            report.problem = (exc.reason, exc.message)
            await self._warn(obj, exc.reason, exc.message, action="Validate")
            raise
        except ActionsError as exc:
            reason = _github_reason(exc)
            report.problem = (reason, f"GitHub call failed, retrying with backoff: {exc}")
            await self._warn(obj, reason, str(exc), action="CallGitHub")
            raise
        except Conflict:
            report.progress = report.progress or ("Retrying", "a concurrent write changed an object; retrying")
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except Exception as exc:
            # Retried by the controller, which reports it once it persists: the status says the same by then.
            report.failed, report.failure = True, pass_failure(exc)
            raise
        finally:
            await self._write_status(obj, report)

    async def _converge(self, scope: _Pass) -> Result:
        ctx, ars, obj, report = self.ctx, scope.ars, scope.obj, scope.report
        config = ctx.github.parse_url(ars.spec.github_config_url)
        url_labels = github_url_labels(config.enterprise, config.organization, config.repository)

        scale_set_id = scale_set_id_of(ars)
        if scale_set_id is None:
            return await self._register(scope, url_labels, replacing=None)

        listener_name = listener_name_of(ars)
        found_listener = self.listeners.get(ctx.settings.controller_namespace, listener_name)
        # Another scale set's listener under this name is not this scale set's (ownership.py): never used,
        # patched or deleted here; the listener phase reports the conflict.
        own = found_listener is not None and listener_is_own(found_listener, Owner.of(obj))
        live_listener = found_listener if own else None
        if self._verification_due(scope, scale_set_id, listener_missing=live_listener is None):
            result = await self._verify(scope, scale_set_id, url_labels)
            if result is not None:
                return result

        patch = url_labels_patch(obj, url_labels)
        if patch:
            await ctx.kube.patch(AUTOSCALING_RUNNER_SETS, ars.name, patch, namespace=ars.namespace)
            report.progress = ("UpdatingLabels", "recording the config URL labels")
            return Result()

        ers_result = await self._ephemeral_runner_set(scope, scale_set_id, url_labels)
        if ers_result is not None:
            return ers_result
        listener_result = await self._listener(scope, scale_set_id, url_labels, found_listener)
        if listener_result is not None:
            return listener_result

        ers = self.runner_sets.get(ars.namespace, scope.runner_set_name) or {}
        revision, applied = revisions_of(ers)
        report.complete = True
        report.runner_set_problem = runner_set_problem(ers) or runner_set_conflict(
            Owner.of(obj), self.runner_sets.list(ars.namespace)
        )
        report.listener_not_ready, report.listener_degraded = listener_problems(live_listener)
        report.ready_message = (
            f"scale set {scale_set_id} registered; EphemeralRunnerSet {scope.runner_set_name} at runner spec"
            f" revision {revision} (applied {applied}); listener {listener_name}"
        )
        return Result(requeue_after=self._until_next_verification(scope))

    # -- phases ---------------------------------------------------------------------------------------

    def _check_version(self, ars: AutoscalingRunnerSet) -> None:
        version = (ars.metadata.labels or {}).get(LABEL_VERSION)
        settings = self.ctx.settings
        build = settings.build_version
        # ARC deletes the object here, which destroys a user's scale set on the strength of a label:
        # reporting it is enough. ARC's own chart versions pass (api/versions.py), so ARC installs move over.
        if not accepts_version_label(version, build, accept_any=settings.accept_any_version_label):
            raise UnsupportedVersion(
                f"label {LABEL_VERSION}={version} is not managed by controller version {build} (it manages its"
                f" own versions and ARC's chart versions {ARC_CHART_VERSIONS}): install the scale set with a"
                " supported chart version, or start the controller with --accept-any-version-label"
            )

    async def _client(self, ars: AutoscalingRunnerSet) -> ActionsClient:
        return await scale_set_client(self.ctx.github, ars)

    async def _register(self, scope: _Pass, url_labels: Mapping[str, str], *, replacing: int | None) -> Result:
        ars, obj = scope.ars, scope.obj
        client = await self._client(ars)
        registration = await register_scale_set(client, ars)
        scale_set = registration.scale_set
        patch = registration_patch(obj, scale_set, url_labels=url_labels)
        if patch:
            await self.ctx.kube.patch(AUTOSCALING_RUNNER_SETS, ars.name, patch, namespace=ars.namespace)
        self._verified[(ars.namespace, ars.name)] = (self.ctx.clock.monotonic(), scale_set.id)
        verb = "registered" if registration.created else "reused the existing"
        note = (
            f"{verb} scale set {scale_set.name!r} (id {scale_set.id}) in runner group {scale_set.runner_group_name!r}"
        )
        if replacing is not None:
            await self._warn(
                obj,
                "ScaleSetReRegistered",
                f"scale set {replacing} no longer exists on GitHub; {note}",
                action="Register",
            )
        else:
            await self._event(obj, "ScaleSetRegistered", note, action="Register")
        scope.report.progress = ("RegisteringScaleSet", note)
        return Result()

    def _verification_due(self, scope: _Pass, scale_set_id: int, *, listener_missing: bool) -> bool:
        key = (scope.ars.namespace, scope.ars.name)
        # The listener found the scale set gone: verify (and register it again) now, not at the next interval.
        # Once per report: a verification that finds the scale set keeps it, and the report is not acted on again.
        gone = scale_set_gone_report(self._runner_sets_of(scope.obj).all(), scale_set_id)
        if gone is not None and self._gone_reports.get(key) != gone.since:
            scope.gone_report = gone.since
            return True
        last = self._verified.get(key)
        if last is None or last[1] != scale_set_id or listener_missing or scope.report.spec_changed:
            return True
        # A removed or edited registration annotation is restored on this pass, as ARC does.
        if registration_record_stale(scope.obj, scope.ars):
            return True
        return self.ctx.clock.monotonic() - last[0] >= self.ctx.settings.scale_set_verify_interval

    def _until_next_verification(self, scope: _Pass) -> float:
        last = self._verified.get((scope.ars.namespace, scope.ars.name))
        interval = self.ctx.settings.scale_set_verify_interval
        if last is None:
            return interval
        return max(0.0, interval - (self.ctx.clock.monotonic() - last[0]))

    async def _verify(self, scope: _Pass, scale_set_id: int, url_labels: Mapping[str, str]) -> Result | None:
        """Confirm the scale set on GitHub; re-register on a definitive 404; sync group/name/labels."""
        ars, obj = scope.ars, scope.obj
        client = await self._client(ars)
        try:
            scale_set = await client.get_runner_scale_set_by_id(scale_set_id)
        except NotFound:
            # Definitively gone (deleted on GitHub). Transient errors propagate and are retried: a 5xx must
            # never make a second scale set.
            result = await self._register(scope, url_labels, replacing=scale_set_id)
            self._acted_on_gone_report(scope)
            return result
        self._acted_on_gone_report(scope)
        changes = await sync_scale_set(client, ars, scale_set)
        if changes:
            scale_set = await client.get_runner_scale_set_by_id(scale_set_id)
            await self._event(
                obj, "ScaleSetUpdated", f"scale set {scale_set_id}: {'; '.join(changes)}", action="Update"
            )
        self._verified[(ars.namespace, ars.name)] = (self.ctx.clock.monotonic(), scale_set_id)
        patch = registration_patch(obj, scale_set, url_labels=url_labels)
        if patch:
            await self.ctx.kube.patch(AUTOSCALING_RUNNER_SETS, ars.name, patch, namespace=ars.namespace)
            scope.report.progress = ("UpdatingScaleSet", "recording the scale set's name and runner group")
            return Result()
        return None

    def _acted_on_gone_report(self, scope: _Pass) -> None:
        if scope.gone_report is not None:
            self._gone_reports[(scope.ars.namespace, scope.ars.name)] = scope.gone_report

    async def _ephemeral_runner_set(
        self, scope: _Pass, scale_set_id: int, url_labels: Mapping[str, str]
    ) -> Result | None:
        ctx, ars, obj, report = self.ctx, scope.ars, scope.obj, scope.report
        desired = desired_ephemeral_runner_set(
            obj,
            ars,
            scale_set_id=scale_set_id,
            url_labels=url_labels,
            excluded_prefixes=ctx.settings.exclude_label_prefixes,
        )
        sets = self._runner_sets_of(obj)
        if sets.superseded:
            return await self._drain_superseded(scope, sets)
        # The current set keeps its name (ARC's are generated); a new one gets the ARS's name. With no current
        # set but some being deleted, the plan waits for them (a teardown rebuilds after the old set is gone).
        live = sets.current or next(iter(sets.draining), None)
        name = ObjectView(live).name if live is not None else ObjectView(desired).name
        plan = plan_ephemeral_runner_set(
            live,
            desired,
            ars_phase=report.phase_in_effect,
            excluded_label_prefixes=ctx.settings.exclude_label_prefixes,
        )
        if plan.action is ErsAction.NONE:
            scope.runner_set_name = name
            return None
        if plan.action is ErsAction.CREATE:
            try:
                await ctx.kube.create(EPHEMERAL_RUNNER_SETS, desired, namespace=ars.namespace)
            except AlreadyExists:
                # The cache has not seen it yet; the deterministic name makes a second set impossible.
                report.progress = ("CreatingEphemeralRunnerSet", f"waiting for EphemeralRunnerSet {name}")
                return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
            await self._event(
                obj, "EphemeralRunnerSetCreated", f"created EphemeralRunnerSet {name} (revision 0)", action="Create"
            )
            report.progress = ("CreatingEphemeralRunnerSet", f"created EphemeralRunnerSet {name}")
            return Result()
        if plan.action is ErsAction.WAIT_FOR_DELETION:
            report.progress = ("WaitingForEphemeralRunnerSet", f"EphemeralRunnerSet {name} is being deleted")
            return Result(requeue_after=WAIT_REQUEUE_SECONDS)
        if plan.action is ErsAction.TEAR_DOWN:
            return await self._tear_down_outdated(scope, name)
        await ctx.kube.patch(EPHEMERAL_RUNNER_SETS, name, plan.patch, namespace=ars.namespace)
        if plan.action is ErsAction.BUMP_REVISION:
            note = (
                f"runner spec changed ({', '.join(plan.changed_fields) or 'ephemeralRunnerSpec'}): EphemeralRunnerSet"
                f" {name} actionableRevision {plan.revision_from} -> {plan.revision_to}; idle and pending runners"
                " are replaced, busy runners finish their job first"
            )
            await self._event(obj, "RevisionBumped", note, action="Update")
            report.progress = ("RollingOutRevision", note)
        else:
            report.progress = ("UpdatingEphemeralRunnerSet", f"merged labels and annotations into {name}")
        return Result()

    def _runner_sets_of(self, obj: Object) -> ScaleSetRunnerSets:
        return sort_runner_sets(runner_sets_of(self.runner_sets, Owner.of(obj)))

    async def _drain_superseded(self, scope: _Pass, sets: ScaleSetRunnerSets) -> Result:
        """Delete the sets older than the current one: their controller drains them (idle runners removed,
        busy ones finish their job), then they go. Only a scale set moved from ARC has such sets."""
        names = [ObjectView(runner_set).name for runner_set in sets.superseded]
        for name in names:
            with contextlib.suppress(KubeNotFound):
                await self.ctx.kube.delete(EPHEMERAL_RUNNER_SETS, name, namespace=scope.ars.namespace)
        note = (
            f"EphemeralRunnerSet {sets.current_name} is the current one: draining and deleting {', '.join(names)}"
            " (idle runners are removed, busy runners finish their job first)"
        )
        await self._event(scope.obj, "EphemeralRunnerSetSuperseded", note, action="Delete")
        scope.report.progress = ("DrainingEphemeralRunnerSets", note)
        return Result()

    async def _tear_down_outdated(self, scope: _Pass, ers_name: str) -> Result:
        ars, obj = scope.ars, scope.obj
        listener_gone = await self._delete_listeners(scope, keep=None)
        if not listener_gone:
            scope.report.progress = ("TearingDownOutdated", "waiting for the listener to be deleted")
            return Result(requeue_after=WAIT_REQUEUE_SECONDS)
        with contextlib.suppress(KubeNotFound):
            await self.ctx.kube.delete(EPHEMERAL_RUNNER_SETS, ers_name, namespace=ars.namespace)
        note = (
            f"EphemeralRunnerSet {ers_name} is Outdated at its current revision (a runner reported an outdated"
            " runner version): deleted it and its listener; they are rebuilt from the spec"
        )
        await self._warn(obj, "RunnerVersionOutdated", note, action="Delete")
        scope.report.progress = ("TearingDownOutdated", note)
        return Result(requeue_after=WAIT_REQUEUE_SECONDS)

    async def _listener(
        self, scope: _Pass, scale_set_id: int, url_labels: Mapping[str, str], live: Object | None
    ) -> Result | None:
        ctx, ars, obj, report = self.ctx, scope.ars, scope.obj, scope.report
        desired = desired_autoscaling_listener(
            ars,
            namespace=ctx.settings.controller_namespace,
            scale_set_id=scale_set_id,
            ephemeral_runner_set=scope.runner_set_name,
            image=ctx.settings.controller_image,
            image_pull_secrets=ctx.settings.image_pull_secrets,
            url_labels=url_labels,
            excluded_prefixes=ctx.settings.exclude_label_prefixes,
        )
        name = ObjectView(desired).name
        # Before anything is deleted: a name another scale set's listener holds is reported, never taken.
        conflict = listener_name_conflict(live, Owner.of(obj))
        if conflict is not None:
            raise conflict
        # Nothing of ARC's is removed before the set it leaves behind is known to take this controller's writes.
        await self._check_adoption(scope)
        # A runner group or URL change gives the listener another name: the old one must not keep running.
        if not await self._delete_listeners(scope, keep=name):
            report.progress = ("RecreatingListener", "waiting for the previous listener to be deleted")
            return Result(requeue_after=WAIT_REQUEUE_SECONDS)
        if live is None:
            try:
                await ctx.kube.create(AUTOSCALING_LISTENERS, desired, namespace=ctx.settings.controller_namespace)
            except AlreadyExists:
                report.progress = ("CreatingListener", f"waiting for AutoscalingListener {name}")
                return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
            await self._event(
                obj,
                "ListenerCreated",
                f"created AutoscalingListener {ctx.settings.controller_namespace}/{name}",
                action="Create",
            )
            report.progress = ("CreatingListener", f"created AutoscalingListener {name}")
            return Result()
        if ObjectView(live).is_deleting:
            report.progress = ("RecreatingListener", f"waiting for AutoscalingListener {name} to be deleted")
            return Result(requeue_after=WAIT_REQUEUE_SECONDS)
        differences = listener_differences(live, desired)
        if not differences:
            return None
        await self._delete_listener(live)
        note = f"listener-relevant fields changed ({', '.join(differences)}): recreating AutoscalingListener {name}"
        await self._event(obj, "ListenerRecreating", note, action="Recreate")
        report.progress = ("RecreatingListener", note)
        return Result(requeue_after=WAIT_REQUEUE_SECONDS)

    async def _check_adoption(self, scope: _Pass) -> None:
        """While ARC's listener is still there (a takeover), dry-run a spec write of the current set like the new
        listener's; :class:`.adoption.AdoptionRefused` when the API server refuses it, so ARC's listener stays."""
        arcs = arcs_live_listeners(self._listeners_of(scope))
        ers = self.runner_sets.get(scope.ars.namespace, scope.runner_set_name)
        if not arcs or ers is None:
            return
        try:
            await self.ctx.kube.patch(EPHEMERAL_RUNNER_SETS, scope.runner_set_name, writability_probe(ers),
                                      namespace=scope.ars.namespace, dry_run=True)  # fmt: skip
        except (Invalid, BadRequest) as exc:
            raise AdoptionRefused(refusal_message(scope.runner_set_name, arcs[0], str(exc))) from None

    async def _delete_listeners(self, scope: _Pass, *, keep: str | None) -> bool:
        """Delete this scale set's listeners other than ``keep``; True when none (other) remains."""
        gone = True
        for listener in self._listeners_of(scope):
            name = listener.name
            if name == keep:
                continue
            gone = False
            if not listener.is_deleting:
                await self._delete_listener(listener.raw)
                if keep is not None:
                    # ARC 0.9.0 to 0.13.0 named the listener after the namespace alone (docs/migration.md).
                    why = (
                        "made by ARC's controller"
                        if listener.annotation(ANNOTATION_RUNNER_SPEC_HASH)
                        else "the runner group or URL changed"
                    )
                    await self._event(
                        scope.obj,
                        "ListenerRemoved",
                        f"deleted AutoscalingListener {name} ({why}): the scale set's listener is {keep}",
                        action="Delete",
                    )
        return gone

    def _listeners_of(self, scope: _Pass) -> list[AutoscalingListenerView]:
        namespace, ars, owner = self.ctx.settings.controller_namespace, scope.ars, Owner.of(scope.obj)
        return [
            listener
            for listener in map(AutoscalingListenerView, self.listeners.by_label(LABEL_SCALE_SET_NAME, ars.name))
            if listener.namespace == namespace
            and listener.labels.get(LABEL_SCALE_SET_NAMESPACE) == ars.namespace
            and listener_is_own(listener.raw, owner)
        ]

    async def _delete_listener(self, listener: Object) -> None:
        """Delete this very listener (a UID precondition): one that took its name meanwhile, maybe another scale
        set's, is kept (the refused precondition is a Conflict: the pass is retried)."""
        view = ObjectView(listener)
        with contextlib.suppress(KubeNotFound):
            await self.ctx.kube.delete(AUTOSCALING_LISTENERS, view.name, namespace=view.namespace,
                                       preconditions=Preconditions(uid=view.uid))  # fmt: skip

    # -- status and events ----------------------------------------------------------------------------

    async def _write_status(self, obj: Object, report: ReconcileReport) -> None:
        """Write the status this pass derived, computed from one consistent read (issue 15).

        The patch is diffed against ``obj`` as this pass read it and carries its ``resourceVersion``. The
        cache may not show this controller's previous status write yet, or the object changed since; then
        the server refuses the patch (409) and the status is derived again from a fresh read, with the
        phase and observed generation as that read has them. A fresh read of another generation means this
        pass worked on an outdated spec: nothing is written, the pass that change triggers writes it. Without
        the lock, a patch diffed against a stale copy carried ``observedGeneration`` without the phase that
        belongs to it, and readers saw ``Pending`` at ``observedGeneration == generation``.

        When the cache still shows the very version the previous write was diffed against (that write has
        not come back through the watch yet), the object that write returned is the fresher read: diffing
        against it saves the refused patch and the GET after it (three requests for one), which the passes
        of a scale set being set up met several times each (every child created brings a pass).
        """
        kube = self.ctx.kube
        latest: Object = obj
        key = (ObjectView(obj).namespace, ObjectView(obj).name)
        written = self._status_written.get(key)
        if written is not None and written[0] == ObjectView(obj).resource_version:
            latest = written[1]

        async def attempt() -> None:
            nonlocal latest
            view = AutoscalingRunnerSetView(latest)
            if view.generation != report.generation:
                return
            read = dataclasses.replace(report, observed_generation=view.observed_generation, stored_phase=view.phase)
            patch = status_patch(view.status, derive_status(view.status, read, now=self.ctx.clock.now()))
            if not patch:
                return
            body = {"metadata": {"resourceVersion": view.resource_version}, "status": patch}
            try:
                stored = await kube.patch(AUTOSCALING_RUNNER_SETS, view.name, body, namespace=view.namespace,
                                          subresource="status")  # fmt: skip
                self._status_written[key] = (view.resource_version, stored)
            except Conflict:
                latest = await kube.get(AUTOSCALING_RUNNER_SETS, view.name, namespace=view.namespace)
                raise

        try:
            await retry_on_conflict(attempt, clock=self.ctx.clock)
        except (Conflict, KubeNotFound) as exc:
            # Gone, or changing faster than we write: the change that beat us brings the key back.
            view = ObjectView(obj)
            log.debug("status of %s/%s not written (%s): %s", view.namespace, view.name, type(exc).__name__, exc)

    async def _event(self, obj: Object, reason: str, note: str, *, action: str) -> None:
        view = ObjectView(obj)
        log.info("%s/%s: %s: %s", view.namespace, view.name, reason, note)
        await self.ctx.events.event(obj, type="Normal", reason=reason, note=note, action=action)

    async def _warn(self, obj: Object, reason: str, note: str, *, action: str) -> None:
        await self.ctx.events.event(obj, type="Warning", reason=reason, note=note, action=action)


def _github_reason(exc: ActionsError) -> str:
    if isinstance(exc, AuthenticationStepFailed):
        return GitHubAuthenticationStepFailed.reason
    if isinstance(exc, Unauthorized):
        return "GitHubAuthenticationFailed"
    if isinstance(exc, RateLimited):
        return "GitHubRateLimited"
    if is_transient(exc):
        return "GitHubUnavailable"
    return "GitHubRequestFailed"


def _first_error(exc: pydantic.ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid spec"
    first = errors[0]
    location = ".".join(str(part) for part in first.get("loc", ()))
    return f"{location}: {first.get('msg', 'invalid')}"


def setup_autoscaling_runner_set_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None
) -> Controller:
    """Build the AutoscalingRunnerSet controller and register it with the context's manager."""
    controller = AutoscalingRunnerSetReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller

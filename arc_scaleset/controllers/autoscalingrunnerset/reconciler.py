"""The AutoscalingRunnerSet reconciler: a scale set on GitHub, its EphemeralRunnerSet, its listener.

A pass has the shape of every kind (docs/controllers.md, "The shape of a pass"): the scale set is gathered
from the cache into a :class:`.scope.ScaleSetPass`, the reconciler's ``phases`` run in order until one acts (each write
brings the key back through a watch) and the status is written once at the end, whatever happened
(:mod:`.status_write`). The phases (docs/controllers.md, AutoscalingRunnerSet; revisions: docs/revisions.md):

1. deleting → :mod:`.deletion` (a pass of its own: no status is written);
2. validation: the version gate (a mismatched ``app.kubernetes.io/version`` is reported, never deleted), the
   runner bounds (:mod:`.bounds`) and the runner template's size (:mod:`arc_scaleset.controllers.runner_template_size`);
   then the Secrets and ConfigMap the scale set is built from are held in the referenced-object watch (released
   when the scale set is gone);
3. the finalizer;
4. registration: the config URL (its labels) and the scale set registered or reused by name in the runner
   group (:mod:`.scale_set_phase`);
5. verification of the scale set on GitHub by ID when :mod:`.verification` says it is due; a definitive 404
   re-registers it (:mod:`.scale_set_phase`);
6. the URL labels recorded on the scale set;
7. the EphemeralRunnerSet (:mod:`.runner_set_phase`, planned by :mod:`.decisions`);
8. the AutoscalingListener, pointed at the current set (:mod:`.listener_phase`);
9. done: ``Running``, ``observedGeneration`` = generation; ``Ready`` and ``Degraded`` also say what the
   runner set's and the listener's own conditions say (:mod:`.status`, :mod:`.listener_report`).

Bad input (secret, URL, TLS, runner group, vault) ends the pass with a ``Degraded`` condition and a Warning
Event, and the key is retried with the workqueue's backoff; nothing is deleted because of it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

import pydantic

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS, AutoscalingRunnerSet
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import AUTOSCALING_RUNNER_SET_FINALIZER, LABEL_VERSION
from arc_scaleset.api.versions import ARC_CHART_VERSIONS, accepts_version_label
from arc_scaleset.api.views import AutoscalingListenerView, AutoscalingRunnerSetView
from arc_scaleset.controllers.autoscalingrunnerset import deletion
from arc_scaleset.controllers.autoscalingrunnerset.bounds import check_runner_bounds
from arc_scaleset.controllers.autoscalingrunnerset.decisions import revisions_of
from arc_scaleset.controllers.autoscalingrunnerset.desired import listener_name_of
from arc_scaleset.controllers.autoscalingrunnerset.events import warn
from arc_scaleset.controllers.autoscalingrunnerset.listener_phase import converge_listener
from arc_scaleset.controllers.autoscalingrunnerset.listener_report import listener_problems
from arc_scaleset.controllers.autoscalingrunnerset.ownership import (
    INDEX_CLAIMED_SCALE_SET,
    claimed_scale_set_index,
    conflict_candidates,
    runner_set_conflict,
)
from arc_scaleset.controllers.autoscalingrunnerset.registration import url_labels_patch
from arc_scaleset.controllers.autoscalingrunnerset.runner_set_phase import converge_runner_set, scale_set_runner_sets
from arc_scaleset.controllers.autoscalingrunnerset.scale_set_phase import registration, verification
from arc_scaleset.controllers.autoscalingrunnerset.scope import (
    CONFLICT_REQUEUE_SECONDS,
    ScaleSetMemory,
    ScaleSetPass,
)
from arc_scaleset.controllers.autoscalingrunnerset.status import (
    ReconcileReport,
    runner_set_problem,
    scale_set_runner_counts,
)
from arc_scaleset.controllers.autoscalingrunnerset.status_write import write_status
from arc_scaleset.controllers.autoscalingrunnerset.verification import seconds_until_verification
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.errors import (
    ConfigurationError,
    GitHubAuthenticationStepFailed,
    InvalidSpec,
    UnsupportedVersion,
    first_spec_error,
)
from arc_scaleset.controllers.failure_report import ReconcileFailureReporter
from arc_scaleset.controllers.reconcile_pass import ObjectMemory, Phase, gather, run_phases
from arc_scaleset.controllers.referenced_objects import scale_set_references
from arc_scaleset.controllers.runner_template_size import check_template_size
from arc_scaleset.github import (
    ActionsError,
    AuthenticationStepFailed,
    RateLimited,
    Unauthorized,
    is_transient,
)
from arc_scaleset.kube.controller import Controller, Request, Result
from arc_scaleset.kube.errors import Conflict
from arc_scaleset.kube.failures import pass_failure
from arc_scaleset.kube.finalizers import add_finalizer, has_finalizer
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.workqueue import RateLimiter

log = logging.getLogger(__name__)

CONTROLLER_NAME = "autoscalingrunnerset"


def listener_to_scale_set(obj: Object) -> Iterable[Request]:
    """An AutoscalingListener concerns the AutoscalingRunnerSet its spec names."""
    listener = AutoscalingListenerView(obj)
    namespace, name = listener.scale_set_namespace, listener.scale_set_name
    return (Request(namespace, name),) if namespace and name else ()


class AutoscalingRunnerSetReconciler:
    """Reconciles AutoscalingRunnerSets; build the controller with :meth:`controller`."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.scale_sets = ctx.cache(AUTOSCALING_RUNNER_SETS)
        self.runner_sets = ctx.cache(EPHEMERAL_RUNNER_SETS)
        with contextlib.suppress(ValueError):  # another reconciler on this manager added it already
            ctx.manager.add_index(EPHEMERAL_RUNNER_SETS, INDEX_CLAIMED_SCALE_SET, claimed_scale_set_index)
        self.listeners = ctx.cache(AUTOSCALING_LISTENERS)
        self.memory: ObjectMemory[ScaleSetMemory] = ObjectMemory(ScaleSetMemory)
        self.phases: tuple[Phase[ScaleSetPass], ...] = (
            self._validate,
            self._finalizer,
            self._registration,
            self._verification,
            self._url_labels,
            self._runner_set,
            self._listener,
            self._done,
        )

    def controller(self, *, rate_limiter: RateLimiter | None = None) -> Controller:
        """The controller running this reconciler; ``rate_limiter``: its workqueue's (``None``: the default)."""
        return Controller(
            CONTROLLER_NAME,
            AUTOSCALING_RUNNER_SETS,
            self.reconcile,
            owns=[EPHEMERAL_RUNNER_SETS],
            watches=[(AUTOSCALING_LISTENERS, listener_to_scale_set)],
            concurrency=self.ctx.settings.scale_set_max_concurrent_reconciles,
            rate_limiter=rate_limiter,
            clock=self.ctx.clock,
            failure_reporter=ReconcileFailureReporter(self.ctx, AUTOSCALING_RUNNER_SETS),
            # Bad input and GitHub errors have their own condition and Event (see reconcile).
            self_reported=(ConfigurationError, ActionsError),
        )

    # -- the pass -------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """One pass: gather, the phases, the status written at the end (the module docstring)."""
        cached = gather(self.scale_sets, self.memory, request)
        if cached is None:
            self.ctx.references.release(request)
            return Result()
        if AutoscalingRunnerSetView(cached).is_deleting:
            self.memory.forget(request)
            return await deletion.reconcile_deletion(self.ctx, cached)
        memory = self.memory.slot(request, AutoscalingRunnerSetView(cached).uid)
        # A pass that carried on after its own writes (ScaleSetPass.carry_on) brings the key back with the first of
        # them: the cache may show it before the last one, whose answer the memory holds.
        obj = memory.writes.freshest(cached)
        view = AutoscalingRunnerSetView(obj)
        report = ReconcileReport(
            generation=view.generation,
            observed_generation=view.observed_generation,
            stored_phase=view.phase,
            runner_counts=scale_set_runner_counts(
                scale_set_runner_sets(self.ctx, obj).all(), in_status=self.ctx.settings.runner_counts_in_status
            ),
        )
        try:
            scope = self._scope(obj, view, request, report, memory)
            return await run_phases(scope, self.phases)
        except ConfigurationError as exc:
            report.problem = (exc.reason, exc.message)
            await warn(self.ctx, obj, exc.reason, exc.message, action="Validate")
            raise
        except ActionsError as exc:
            reason = _github_reason(exc)
            report.problem = (reason, f"GitHub call failed, retrying with backoff: {exc}")
            await warn(self.ctx, obj, reason, str(exc), action="CallGitHub")
            raise
        except Conflict:
            report.progress = report.progress or ("Retrying", "a concurrent write changed an object; retrying")
            return Result(requeue_after=CONFLICT_REQUEUE_SECONDS)
        except Exception as exc:
            # Retried by the controller, which reports it once it persists: the status says the same by then.
            report.failed, report.failure = True, pass_failure(exc)
            raise
        finally:
            # Against the cache's copy: the memory answers with the freshest (and keeps every version it replaced).
            await write_status(self.ctx, cached, report, memory)

    def _scope(
        self,
        obj: Object,
        view: AutoscalingRunnerSetView,
        request: Request,
        report: ReconcileReport,
        memory: ScaleSetMemory,
    ) -> ScaleSetPass:
        """The pass's scope: the scale set parsed (:class:`.errors.InvalidSpec` when it cannot be) and the
        listener under its name."""
        try:
            ars = AutoscalingRunnerSet.from_object(obj)
        except pydantic.ValidationError as exc:
            raise InvalidSpec(f"the AutoscalingRunnerSet cannot be read: {first_spec_error(exc)}") from None
        listener = self.listeners.get(self.ctx.settings.controller_namespace, listener_name_of(ars))
        return ScaleSetPass(obj, view, ars, request, report, memory, listener)

    # -- phases ---------------------------------------------------------------------------------------

    async def _validate(self, scope: ScaleSetPass) -> None:
        """The version gate, the runner bounds, the template's size: refused before anything is written. Then the
        objects the scale set is built from are watched, so that the passes setting it up read each once per
        change (:meth:`~arc_scaleset.controllers.referenced_objects.ReferencedObjectWatch.hold`)."""
        self._check_version(scope.ars)
        check_runner_bounds(scope.ars, ceiling=self.ctx.settings.max_runners_ceiling)
        check_template_size(scope.obj, limit=self.ctx.settings.max_runner_template_bytes)
        self.ctx.references.hold(scope.key, scale_set_references(scope.ars))

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

    async def _finalizer(self, scope: ScaleSetPass) -> Result | None:
        if has_finalizer(scope.obj, AUTOSCALING_RUNNER_SET_FINALIZER):
            return None
        kube = self.ctx.kube
        stored = await add_finalizer(kube, AUTOSCALING_RUNNER_SETS, scope.obj, AUTOSCALING_RUNNER_SET_FINALIZER)
        scope.report.progress = ("AddingFinalizer", "adding the finalizer")
        return None if scope.carry_on(stored) else Result()

    async def _registration(self, scope: ScaleSetPass) -> Result | None:
        return await registration(self.ctx, scope)

    async def _verification(self, scope: ScaleSetPass) -> Result | None:
        return await verification(self.ctx, scope)

    async def _url_labels(self, scope: ScaleSetPass) -> Result | None:
        patch = url_labels_patch(scope.obj, scope.url_labels)
        if not patch:
            return None
        ars = scope.ars
        stored = await self.ctx.kube.patch(AUTOSCALING_RUNNER_SETS, ars.name, patch, namespace=ars.namespace)
        scope.report.progress = ("UpdatingLabels", "recording the config URL labels")
        return None if scope.carry_on(stored) else Result()

    async def _runner_set(self, scope: ScaleSetPass) -> Result | None:
        return await converge_runner_set(self.ctx, scope)

    async def _listener(self, scope: ScaleSetPass) -> Result | None:
        return await converge_listener(self.ctx, scope)

    async def _done(self, scope: ScaleSetPass) -> Result:
        """Every child is in line: the report says so, with what the runner set and the listener report."""
        ars, report, name = scope.ars, scope.report, scope.runner_set_name
        ers = self.runner_sets.get(ars.namespace, name) or {}
        revision, applied = revisions_of(ers)
        report.complete = True
        report.runner_set_problem = runner_set_problem(ers) or runner_set_conflict(
            scope.owner, conflict_candidates(self.runner_sets, scope.owner)
        )
        report.listener_not_ready, report.listener_degraded = listener_problems(scope.own_listener)
        report.ready_message = (
            f"scale set {scope.scale_set_id} registered; EphemeralRunnerSet {name} at runner spec"
            f" revision {revision} (applied {applied}); listener {listener_name_of(ars)}"
        )
        now, interval = self.ctx.clock.monotonic(), self.ctx.settings.scale_set_verify_interval
        return Result(requeue_after=seconds_until_verification(scope.memory, now=now, interval=interval))


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


def setup_autoscaling_runner_set_controller(
    ctx: ControllerContext, *, rate_limiter: RateLimiter | None = None
) -> Controller:
    """Build the AutoscalingRunnerSet controller and register it with the context's manager."""
    controller = AutoscalingRunnerSetReconciler(ctx).controller(rate_limiter=rate_limiter)
    ctx.manager.add(controller)
    return controller

"""Read-only views of the four ``actions.github.com`` kinds: the spec and status fields the controllers read.

Each view is an :class:`~arc_scaleset.kube.views.ObjectView` (metadata, ``spec``, ``status``) plus typed
accessors for the fields its kind's reconcilers act on, with the same contract: the object is read in
place, never copied, and a missing or malformed field reads as its empty value (the CRD schema keeps the
API server's objects well-formed; objects built by hand or by an older controller may not be). Returned
mappings are the object's own, typed read-only.

The pydantic models of :mod:`arc_scaleset.api` remain the way to *validate* a whole object (the
AutoscalingRunnerSet and AutoscalingListener reconcilers parse their primary object with them); the views are
for the hot reads of cached objects, where parsing a whole object on every event would cost more than
the reconcile itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from arc_scaleset.api.ephemeralrunner import DONE_PHASES
from arc_scaleset.api.keys import ANNOTATION_ACTIONABLE_REVISION, ANNOTATION_PATCH_ID
from arc_scaleset.kube.views import ObjectView, integer, mapping, named, parse_int, sequence, string


class EphemeralRunnerView(ObjectView):
    """An EphemeralRunner: its stamps (patch ID, revision), its registration and its job."""

    __slots__ = ()

    # -- the set's stamps (annotations) ---------------------------------------------------------------

    @property
    def patch_id(self) -> int:
        """The ``actions.github.com/patch-id`` annotation (the set's ``spec.patchID`` at creation); 0 when
        missing or unparsable."""
        return parse_int(self.annotations.get(ANNOTATION_PATCH_ID))

    @property
    def revision(self) -> int:
        """The ``actions.github.com/actionable-revision`` annotation (the set's ``spec.actionableRevision`` at
        creation); 0 when missing or unparsable."""
        return parse_int(self.annotations.get(ANNOTATION_ACTIONABLE_REVISION))

    # -- spec -----------------------------------------------------------------------------------------

    @property
    def runner_scale_set_id(self) -> int:
        return integer(self.spec.get("runnerScaleSetId"))

    @property
    def pod_metadata(self) -> Mapping[str, Any]:
        """``spec.metadata``: the inlined pod template's metadata."""
        return mapping(self.spec.get("metadata"))

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        """``spec.spec``: the inlined pod template's spec."""
        return mapping(self.spec.get("spec"))

    @property
    def containers(self) -> Sequence[Mapping[str, Any]]:
        """The pod template's containers, as stored."""
        return sequence(self.pod_spec.get("containers"))

    def container(self, name: str) -> Mapping[str, Any] | None:
        """The pod template's container called ``name``, or ``None``."""
        return named(self.containers, name)

    @property
    def proxy(self) -> Mapping[str, Any]:
        """``spec.proxy`` (empty when no proxy is configured)."""
        return mapping(self.spec.get("proxy"))

    @property
    def proxy_secret_ref(self) -> str:
        return string(self.spec.get("proxySecretRef"))

    @property
    def config_secret_metadata(self) -> Mapping[str, Any]:
        """``spec.ephemeralRunnerConfigSecretMetadata``: extra labels and annotations for the JIT Secret."""
        return mapping(self.spec.get("ephemeralRunnerConfigSecretMetadata"))

    # -- status ---------------------------------------------------------------------------------------

    @property
    def phase(self) -> str:
        """``status.phase``; ``""`` (read as Pending) before the first status write."""
        return string(self.status.get("phase"))

    @property
    def is_done(self) -> bool:
        """Succeeded, Failed or Outdated: the runner will do nothing more."""
        return self.phase in DONE_PHASES

    @property
    def ready(self) -> bool:
        return self.status.get("ready") is True

    @property
    def reason(self) -> str:
        return string(self.status.get("reason"))

    @property
    def message(self) -> str:
        return string(self.status.get("message"))

    @property
    def runner_id(self) -> int:
        """The runner's registration ID on GitHub; 0 before it is recorded."""
        return integer(self.status.get("runnerId"))

    @property
    def job_id(self) -> str:
        """``status.jobId``, set by the listener when a job is assigned; ``""`` when none is."""
        value = self.status.get("jobId")
        # Unlike other fields, a malformed non-empty value still reads as a job: a runner that may be busy must
        # never be taken for an idle one (idle runners are what scale-down and revision cleanup remove).
        return value if isinstance(value, str) else str(value) if value else ""

    @property
    def job_request_id(self) -> int:
        """``status.jobRequestId``: the only job field ARC's listeners up to 0.12 wrote; 0 when none."""
        return integer(self.status.get("jobRequestId"))

    @property
    def has_job(self) -> bool:
        """A job was assigned: ``jobId`` set, or ``jobRequestId`` above 0 (runners adopted from ARC <= 0.12)."""
        return self.job_id != "" or self.job_request_id > 0

    @property
    def failures(self) -> Mapping[str, Any]:
        """``status.failures``: when each failed pod (by UID) was seen failing."""
        return mapping(self.status.get("failures"))


class EphemeralRunnerSetView(ObjectView):
    """An EphemeralRunnerSet: the listener's ``replicas``/``patchID`` and the revision bookkeeping."""

    __slots__ = ()

    @property
    def replicas(self) -> int:
        return integer(self.spec.get("replicas"))

    @property
    def patch_id(self) -> int:
        """``spec.patchID``: the listener patch that set ``replicas`` (0: idle at minRunners)."""
        return integer(self.spec.get("patchID"))

    @property
    def actionable_revision(self) -> int:
        """``spec.actionableRevision``: the revision of ``ephemeralRunnerSpec``."""
        return integer(self.spec.get("actionableRevision"))

    @property
    def runner_spec(self) -> Mapping[str, Any]:
        """``spec.ephemeralRunnerSpec``: what every new EphemeralRunner gets."""
        return mapping(self.spec.get("ephemeralRunnerSpec"))

    @property
    def runner_metadata(self) -> Mapping[str, Any]:
        """``spec.ephemeralRunnerMetadata``: extra labels and annotations for new EphemeralRunners."""
        return mapping(self.spec.get("ephemeralRunnerMetadata"))

    @property
    def phase(self) -> str:
        return string(self.status.get("phase"))

    @property
    def applied_actionable_revision(self) -> int:
        """``status.appliedActionableRevision``: the revision whose cleanup is done."""
        return integer(self.status.get("appliedActionableRevision"))

    @property
    def finished_runner_cleanup_patch_id(self) -> int:
        """``status.finishedRunnerCleanupPatchID``: the patch ID at which finished runners were last reaped."""
        return integer(self.status.get("finishedRunnerCleanupPatchID"))

    @property
    def revision_pending(self) -> bool:
        """``spec.actionableRevision > status.appliedActionableRevision``: a spec change awaits its cleanup."""
        return self.actionable_revision > self.applied_actionable_revision


class AutoscalingRunnerSetView(ObjectView):
    """An AutoscalingRunnerSet's status as last written (its spec is read through the pydantic model)."""

    __slots__ = ()

    @property
    def observed_generation(self) -> int:
        return integer(self.status.get("observedGeneration"))

    @property
    def phase(self) -> str:
        return string(self.status.get("phase"))


class AutoscalingListenerView(ObjectView):
    """An AutoscalingListener: which scale set it serves, and its conditions."""

    __slots__ = ()

    @property
    def scale_set_namespace(self) -> str:
        """``spec.autoscalingRunnerSetNamespace``."""
        return string(self.spec.get("autoscalingRunnerSetNamespace"))

    @property
    def scale_set_name(self) -> str:
        """``spec.autoscalingRunnerSetName``."""
        return string(self.spec.get("autoscalingRunnerSetName"))

    @property
    def ephemeral_runner_set_name(self) -> str:
        """``spec.ephemeralRunnerSetName`` (in the scale set's namespace): the set the listener scales."""
        return string(self.spec.get("ephemeralRunnerSetName"))

    @property
    def conditions(self) -> Sequence[Mapping[str, Any]]:
        return sequence(self.status.get("conditions"))

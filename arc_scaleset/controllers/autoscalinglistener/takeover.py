"""The scale set steps of an AutoscalingListener pass (docs/controllers.md, step 3; docs/migration.md).

- :meth:`ScaleSetClaim.find_scale_set`: the AutoscalingRunnerSet the spec names must exist, checked against the
  API and not only the cache (never delete on the strength of a cache miss); otherwise the listener is deleted.
- :meth:`ScaleSetClaim.leave_arc_listener`: a listener ARC's controller made (ARC's
  ``actions.github.com/runner-spec-hash`` annotation) is left as it is: the AutoscalingRunnerSet controller
  replaces it, once, on the takeover, and adjusting its pod first would replace ARC's listener twice.
"""

from __future__ import annotations

import logging

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_AUTOSCALING_RUNNER_SET_UID, ANNOTATION_RUNNER_SPEC_HASH
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerPass
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Result
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)


class ScaleSetClaim:
    """Finds the scale set a listener belongs to; ``scale_sets``: the AutoscalingRunnerSet cache."""

    def __init__(self, kube: KubeClient, scale_sets: Cache) -> None:
        self.kube = kube
        self.scale_sets = scale_sets

    async def find_scale_set(self, scope: ListenerPass) -> Result | None:
        """The phase: ``scope.scale_set`` set to the live AutoscalingRunnerSet, or the listener deleted."""
        scale_set = await self._live_scale_set(scope)
        if scale_set is None:
            log.info("AutoscalingListener %s: its AutoscalingRunnerSet is gone; deleting it", scope.key)
            await self.kube.delete(
                AUTOSCALING_LISTENERS, scope.view.name, namespace=scope.view.namespace, missing_ok=True
            )
            return Result()
        scope.scale_set = scale_set
        return None

    async def leave_arc_listener(self, scope: ListenerPass) -> Result | None:
        """The phase that ends the pass of a listener ARC's controller made (it is being replaced)."""
        if scope.view.annotation(ANNOTATION_RUNNER_SPEC_HASH):
            log.debug("AutoscalingListener %s was made by ARC's controller; it is being replaced", scope.key)
            return Result()
        return None

    async def _live_scale_set(self, scope: ListenerPass) -> Object | None:
        """The live AutoscalingRunnerSet the spec names (``None``: it does not exist).

        The cached copy when it has the UID the listener claims; otherwise as the API has it now, since the cache
        may not have seen it (or its replacement) yet: never delete or refuse on the strength of a cache miss.
        """
        namespace, name = scope.view.scale_set_namespace, scope.view.scale_set_name
        claimed_uid = scope.view.annotation(ANNOTATION_AUTOSCALING_RUNNER_SET_UID)
        cached = self.scale_sets.get(namespace, name)
        if cached is not None and claimed_uid and ObjectView(cached).uid == claimed_uid:
            return cached
        try:
            return await self.kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)
        except NotFound:
            return None

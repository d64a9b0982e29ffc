"""The AutoscalingListener's own configuration errors: each refuses the listener a pod (docs/controllers.md)."""

from __future__ import annotations

from typing import Final

from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.errors import ObjectInTheWay as ObjectInTheWay  # shared with the runner's children


class InvalidListenerTemplate(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """``listenerTemplate`` is refused by the policy (:mod:`.template_policy`) or by the API server."""

    reason = "InvalidListenerTemplate"


class ForbiddenListenerMetadata(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """A label or annotation the listener's pod or ServiceAccount may not carry (:mod:`.metadata_policy`)."""

    reason = "ForbiddenListenerMetadata"


REFUSALS: Final = (InvalidListenerTemplate, ForbiddenListenerMetadata, ObjectInTheWay)
"""Configuration errors after which no listener pod may run: it is withdrawn and ``Degraded`` says why."""

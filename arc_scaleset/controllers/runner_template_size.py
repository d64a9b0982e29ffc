"""How large a runner pod template may be: every runner stores a copy of it.

The EphemeralRunnerSet copies the scale set's ``spec.template`` and every EphemeralRunner copies it again; each
copy is stored in etcd and held in the controller's cache. Without a bound, a tenant's 1 MB template times a few
thousand runners fills etcd's default 2 GiB quota (every write in the cluster then fails) and the controller's
memory (issue 26, item 9). The controller's bound (``--max-runner-template-bytes``, default 256 KiB: a runner
template with a few dozen containers, scripts and volumes is a few KiB) is measured on the template as the API
server holds it, serialised as compact JSON.

Two controllers apply it (docs/controllers.md):

- the AutoscalingRunnerSet's, on ``spec.template`` (:func:`check_template_size`): a scale set above it is refused
  before anything is registered, created or changed for it, a ``RunnerTemplateTooLarge`` condition and Warning
  Event naming the size and the bound, retried with backoff like any bad input. A running scale set whose
  template grows above it keeps what it has (nothing is deleted, its runner set keeps the previous template)
  until the template is made smaller or the bound raised;
- the EphemeralRunnerSet's, on the pod template inlined in ``spec.ephemeralRunnerSpec``
  (:func:`runner_set_template_problem`), for a set made by hand (no scale set checked it) or edited since: it
  creates no runner from it, and its ``Degraded`` condition says why. A set its scale set made carries the
  same bytes the scale set was measured on (its ``metadata`` and ``spec``, copied as they are), so a scale set
  within the bound never has its runner set refused.

Pure: no API access.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.kube.views import mapping

KIB: Final = 1024
_POD_TEMPLATE_FIELDS: Final = ("metadata", "spec")
"""The fields of a core/v1 PodTemplateSpec, which an EphemeralRunnerSpec inlines among its own."""


class RunnerTemplateTooLarge(ConfigurationError):  # noqa: N818 - the name reads as the condition it reports
    """The runner pod template serialises to more than the controller's ``--max-runner-template-bytes``."""

    reason = "RunnerTemplateTooLarge"


def pod_template_size(template: object) -> int:
    """The bytes of a pod template as compact JSON (anything but a mapping measures as ``{}``)."""
    return len(orjson.dumps(mapping(template)))


def template_size(scale_set: Mapping[str, Any]) -> int:
    """The bytes of ``spec.template`` of ``scale_set`` (an AutoscalingRunnerSet as read), as compact JSON."""
    return pod_template_size(mapping(scale_set.get("spec")).get("template"))


def runner_set_template(runner_set: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template the runners of ``runner_set`` (an EphemeralRunnerSet as read) are made from: the
    ``metadata`` and ``spec`` its ``spec.ephemeralRunnerSpec`` inlines, as a PodTemplateSpec."""
    runner_spec: Mapping[str, Any] = mapping(mapping(runner_set.get("spec")).get("ephemeralRunnerSpec"))
    return {field: runner_spec[field] for field in _POD_TEMPLATE_FIELDS if field in runner_spec}


def check_template_size(scale_set: Mapping[str, Any], *, limit: int) -> None:
    """Raise :class:`RunnerTemplateTooLarge` when ``scale_set``'s runner template is above ``limit`` bytes."""
    size = template_size(scale_set)
    if size > limit:
        raise RunnerTemplateTooLarge(
            _too_large("spec.template", size, limit, "nothing is created or changed for this scale set until then")
        )


def runner_set_template_problem(runner_set: Mapping[str, Any], *, limit: int) -> tuple[str, str] | None:
    """``(reason, message)`` of ``Degraded`` when the runner template of ``runner_set`` (an EphemeralRunnerSet
    as read) is above ``limit`` bytes; ``None`` when it is within."""
    size = pod_template_size(runner_set_template(runner_set))
    if size <= limit:
        return None
    what = "the runner pod template (metadata and spec of spec.ephemeralRunnerSpec)"
    consequence = "no runner is created (nor registered on GitHub) from it until then"
    return RunnerTemplateTooLarge.reason, _too_large(what, size, limit, consequence)


def _too_large(what: str, size: int, limit: int, consequence: str) -> str:
    return (
        f"{what} is {_kib(size)} as JSON, above the controller's bound of {_kib(limit)}"
        " (--max-runner-template-bytes): every runner stores a copy of it. Make the template smaller (mount"
        " large scripts or files from a ConfigMap or the image), or start the controller with a higher bound;"
        f" {consequence}"
    )


def _kib(size: int) -> str:
    return f"{size / KIB:.1f} KiB ({size} bytes)"

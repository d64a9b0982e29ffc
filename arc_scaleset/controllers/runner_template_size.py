"""How large a scale set's runner pod template may be: every runner stores a copy of it.

The EphemeralRunnerSet copies the scale set's ``spec.template`` and every EphemeralRunner copies it again; each
copy is stored in etcd and held in the controller's cache. Without a bound, a tenant's 1 MB template times a few
thousand runners fills etcd's default 2 GiB quota (every write in the cluster then fails) and the controller's
memory (issue 26, item 9). The controller's bound (``--max-runner-template-bytes``, default 256 KiB: a runner
template with a few dozen containers, scripts and volumes is a few KiB) is measured on the template as the API
server holds it, serialised as compact JSON.

A scale set above it is refused before anything is registered, created or changed for it: a
``RunnerTemplateTooLarge`` condition and Warning Event naming the size and the bound, retried with backoff like any
bad input. A running scale set whose template grows above it keeps what it has (nothing is deleted, its runner
set keeps the previous template) until the template is made smaller or the bound raised.
"""

from __future__ import annotations

from typing import Final

import orjson

from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.views import mapping

KIB: Final = 1024


class RunnerTemplateTooLarge(ConfigurationError):  # noqa: N818 - the name reads as the condition it reports
    """``spec.template`` serialises to more than the controller's ``--max-runner-template-bytes``."""

    reason = "RunnerTemplateTooLarge"


def template_size(scale_set: Object) -> int:
    """The bytes of ``spec.template`` of ``scale_set`` (an AutoscalingRunnerSet as read), as compact JSON."""
    return len(orjson.dumps(mapping(mapping(scale_set.get("spec")).get("template"))))


def check_template_size(scale_set: Object, *, limit: int) -> None:
    """Raise :class:`RunnerTemplateTooLarge` when ``scale_set``'s runner template is above ``limit`` bytes."""
    size = template_size(scale_set)
    if size > limit:
        raise RunnerTemplateTooLarge(
            f"spec.template is {_kib(size)} as JSON, above the controller's bound of {_kib(limit)}"
            " (--max-runner-template-bytes): every runner stores a copy of it. Make the template smaller (mount"
            " large scripts or files from a ConfigMap or the image), or start the controller with a higher bound;"
            " nothing is created or changed for this scale set until then"
        )


def _kib(size: int) -> str:
    return f"{size / KIB:.1f} KiB ({size} bytes)"

"""The four reconcilers registered with one manager.

:func:`setup_controllers` is what ``arc-scaleset controller`` calls after building the manager and the
:class:`~arc_scaleset.controllers.context.ControllerContext`; tests and the demo that run the controllers
in-process call it the same way, so every caller gets the same controllers with the same options.
"""

from __future__ import annotations

from collections.abc import Callable

from arc_scaleset.controllers.autoscalinglistener.reconciler import setup_autoscaling_listener_controller
from arc_scaleset.controllers.autoscalingrunnerset.reconciler import setup_autoscaling_runner_set_controller
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.reconciler import setup_ephemeral_runner_controller
from arc_scaleset.controllers.ephemeralrunnerset.reconciler import setup_ephemeral_runner_set_controller
from arc_scaleset.kube.controller import Controller
from arc_scaleset.kube.workqueue import RateLimiter

RateLimiterFactory = Callable[[], RateLimiter]
"""Makes one workqueue rate limiter (each controller gets its own)."""


def setup_controllers(ctx: ControllerContext, *, rate_limiter: RateLimiterFactory | None = None) -> list[Controller]:
    """Build the AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner and AutoscalingListener
    controllers, register them with ``ctx.manager`` (before it runs) and return them.

    ``rate_limiter`` gives each controller its own workqueue rate limiter (``None``: the runtime's
    default, per-key exponential backoff only). Concurrency comes from ``ctx.settings``.
    """

    def limiter() -> RateLimiter | None:
        # A fresh limiter per controller: a shared one would let one controller's failures slow the others.
        return rate_limiter() if rate_limiter is not None else None

    return [
        setup_autoscaling_runner_set_controller(ctx, rate_limiter=limiter()),
        setup_ephemeral_runner_set_controller(ctx, rate_limiter=limiter()),
        setup_ephemeral_runner_controller(ctx, rate_limiter=limiter()),
        setup_autoscaling_listener_controller(ctx, rate_limiter=limiter()),
    ]

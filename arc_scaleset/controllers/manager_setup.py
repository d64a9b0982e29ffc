"""The four reconcilers registered with one manager.

:func:`setup_controllers` is what ``arc-scaleset controller`` calls after building the manager and the
:class:`~arc_scaleset.controllers.context.ControllerContext`; tests and the demo that run the controllers
in-process call it the same way, so every caller gets the same controllers with the same options.
"""

from __future__ import annotations

from collections.abc import Callable

from arc_scaleset.controllers.autoscalinglistener import AutoscalingListenerReconciler
from arc_scaleset.controllers.autoscalingrunnerset import AutoscalingRunnerSetReconciler
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner import setup_ephemeral_runner_controller
from arc_scaleset.controllers.ephemeralrunnerset import setup_ephemeral_runner_set_controller
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
    # TODO(controllers): the ARS and AL modules expose reconciler classes, the ER and ERS modules
    # setup_* functions; switch the first two to setup_* functions if their authors add them.
    autoscaling_runner_sets = AutoscalingRunnerSetReconciler(ctx).controller()
    ctx.manager.add(autoscaling_runner_sets)
    ephemeral_runner_sets = setup_ephemeral_runner_set_controller(ctx)
    ephemeral_runners = setup_ephemeral_runner_controller(ctx)
    listeners = AutoscalingListenerReconciler(ctx).controller()
    ctx.manager.add(listeners)
    controllers = [autoscaling_runner_sets, ephemeral_runner_sets, ephemeral_runners, listeners]
    if rate_limiter is not None:
        for controller in controllers:
            _use_rate_limiter(controller, rate_limiter())
    return controllers


def _use_rate_limiter(controller: Controller, limiter: RateLimiter) -> None:
    # The reconcilers build their Controller themselves and Controller takes its limiter only as a
    # constructor argument; the workqueue is created from it at start, so replacing it before the
    # manager runs is equivalent. TODO(kube): a public Controller.rate_limiter setter would avoid this.
    if controller.running:
        raise RuntimeError(f"{controller!r} is already running; set its rate limiter before the manager starts")
    controller._rate_limiter = limiter

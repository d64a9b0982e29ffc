"""The four reconcilers registered with one manager, and what the manager caches for them.

:func:`setup_controllers` is what ``arc-scaleset controller`` calls after building the manager and the
:class:`~arc_scaleset.controllers.context.ControllerContext`; tests and the demo that run the controllers
in-process call it the same way, so every caller gets the same controllers with the same options.
:func:`cache_label_selectors` is the manager's ``label_selectors``: which Pods, ServiceAccounts, Roles and
RoleBindings it caches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from arc_scaleset.api.keys import LABEL_SCALE_SET_NAME
from arc_scaleset.controllers.autoscalinglistener.reconciler import setup_autoscaling_listener_controller
from arc_scaleset.controllers.autoscalingrunnerset.reconciler import setup_autoscaling_runner_set_controller
from arc_scaleset.controllers.context import ControllerContext
from arc_scaleset.controllers.ephemeralrunner.reconciler import setup_ephemeral_runner_controller
from arc_scaleset.controllers.ephemeralrunnerset.reconciler import setup_ephemeral_runner_set_controller
from arc_scaleset.controllers.sharedlistener.reconciler import setup_shared_listener_controller
from arc_scaleset.controllers.warmcapacity.reconciler import setup_warm_capacity_controller
from arc_scaleset.kube.controller import Controller
from arc_scaleset.kube.resources import PODS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.workqueue import RateLimiter

RateLimiterFactory = Callable[[], RateLimiter]
"""Makes one workqueue rate limiter (each controller gets its own)."""

CHILD_LABEL: Final = LABEL_SCALE_SET_NAME
"""The label every object of these kinds that the controllers read carries, whoever made it: runner pods (from
their EphemeralRunner's labels) and listener pods (from their AutoscalingListener's), the listener's
ServiceAccount, Role and RoleBinding, and the scale-set chart's ServiceAccounts, Roles and RoleBindings that the
controller releases when a scale set goes (the chart's labels). ARC's controller and charts (0.9 to 0.14) put it
on the same objects, so what an installation adopts from ARC is cached too (docs/migration.md)."""
CACHED_BY_LABEL: Final = (PODS, SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS)
"""Kinds of which the manager caches only the objects carrying :data:`CHILD_LABEL`."""


def cache_label_selectors(excluded_label_prefixes: Iterable[str] = ()) -> dict[Resource, str]:
    """The manager's ``label_selectors``: every kind of :data:`CACHED_BY_LABEL` selected by :data:`CHILD_LABEL`
    (``key`` alone: the label exists), so the cache holds the scale sets' objects and not every pod,
    ServiceAccount, Role and RoleBinding in the cluster.

    When ``--exclude-label-propagation-prefix`` drops that label from the children (a prefix of it is
    excluded), no selector: the objects the controller makes would not carry it, and the cache holds everything
    of those kinds, as it did before.
    """
    prefixes = tuple(excluded_label_prefixes)
    if prefixes and CHILD_LABEL.startswith(prefixes):
        return {}
    return dict.fromkeys(CACHED_BY_LABEL, CHILD_LABEL)


def setup_controllers(ctx: ControllerContext, *, rate_limiter: RateLimiterFactory | None = None) -> list[Controller]:
    """Build the AutoscalingRunnerSet, EphemeralRunnerSet, EphemeralRunner and AutoscalingListener
    controllers, the shared-listener controller, and the warm-pool controller unless
    ``ctx.settings.warm_capacity`` is off, register them with ``ctx.manager`` (before it runs) and return them.

    ``rate_limiter`` gives each controller its own workqueue rate limiter (``None``: the runtime's
    default, per-key exponential backoff only). Concurrency comes from ``ctx.settings``.
    """

    def limiter() -> RateLimiter | None:
        # A fresh limiter per controller: a shared one would let one controller's failures slow the others.
        return rate_limiter() if rate_limiter is not None else None

    controllers = [
        setup_autoscaling_runner_set_controller(ctx, rate_limiter=limiter()),
        setup_ephemeral_runner_set_controller(ctx, rate_limiter=limiter()),
        setup_ephemeral_runner_controller(ctx, rate_limiter=limiter()),
        setup_autoscaling_listener_controller(ctx, rate_limiter=limiter()),
        setup_shared_listener_controller(ctx, rate_limiter=limiter()),
    ]
    if ctx.settings.warm_capacity:
        controllers.append(setup_warm_capacity_controller(ctx, rate_limiter=limiter()))
    return controllers

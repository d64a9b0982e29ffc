"""Whether an EphemeralRunner's status write waits in memory rather than in the client's rate limit, as a pure
function (docs/controllers.md, "A status write yields to a busy rate limit").

The EphemeralRunner controller has few workers (``--runner-max-concurrent-reconciles``, 2 by default), and
the runners' creates, which the EphemeralRunnerSet sends 50 at a time, and their status writes draw on one
token bucket (EphemeralRunners, as controller-runtime's client gives ARC). A status write that queued behind
such a batch held its worker for the batch's 2.5 s at 20 QPS, and with both workers held no runner was
registered meanwhile: a scale-up of 200 registered its runners in waves. So a pass whose status write would
wait for a token holds its changes in the runner's memory instead (:class:`.memory.RunnerMemory`, where they
are overlaid on the cached status like a written one) and comes back when a token would be there; the worker
registers other runners meanwhile.

:func:`status_hold` says for how long. Written at once, whatever the limiter says:

- a write that other work of the pass must follow (the status records a decision first: delete the runner,
  unregister it, delete its pod to retry, see :class:`.scope.RunnerPass`);
- a done phase (``Succeeded``, ``Failed``, ``Outdated``): the EphemeralRunnerSet acts on it;
- changes held for :data:`MAX_HOLD` seconds in all already, so that a bucket that stays busy (a scale-up of
  thousands) delays a runner's status by at most that much before its write queues like any other.

Nothing is lost by holding: until the write, the runner's ID is recorded in its JIT Secret (a restarted
controller reads it) and its phase is the pod's, mirrored again by the next pass.
"""

from __future__ import annotations

from typing import Final

MAX_HOLD: Final = 30.0
"""Seconds a runner's status changes may be held back in all (counted from when they were first held)."""
RECHECK_DUE: Final = 0.05
"""Seconds after which a pass comes back for changes that were due at its end but not written (held for less
time than the rest of the pass took: a token nearly there)."""


def status_hold(*, rate_limit_delay: float, held_for: float, follow_ups: bool, done: bool) -> float:
    """Seconds to hold the status write back (0: write it now).

    ``rate_limit_delay``: how long the write would wait for its token now (the client's
    ``rate_limit_delay``); ``held_for``: seconds the changes have been held already (0: they are new);
    ``follow_ups``: the pass has work that must follow the write; ``done``: the write sets a done phase.
    """
    if follow_ups or done or rate_limit_delay <= 0 or held_for >= MAX_HOLD:
        return 0.0
    return min(rate_limit_delay, MAX_HOLD - held_for)

"""Whether a scale decision must be patched onto the EphemeralRunnerSet (docs/listener.md, "Only what changed").

Pure: :func:`plan_publish` compares the decision about to be published with the last one that landed and with
what the listener's watch of its set shows, and says whether the patch is needed. The rules, in the order they
are checked:

1. **Nothing landed yet** in this process: send (the first decision is the force-state patch ID 0 a new
   listener owes the set, and it records the cursor the successor needs).
2. **A patch ID above 0 is always sent.** The runner-set controller acts on each such ID once ("scale up to
   ``replicas`` if short", and it reaps finished runners once per ID,
   ``status.finishedRunnerCleanupPatchID``); the sequence never repeats one, so such a decision is never a
   repeat, and one skipped would be a refill or a reaping that never happens. In practice only the repeated
   "force state" decision (patch ID 0 at the minimum, nothing happened) is ever skipped.
3. **Another target or patch ID than the last landed one**: send.
4. **Another cursor than the set carries since the last landed patch** (a message acted on, a new or resumed
   session, acquisitions confirmed or asked for): send. A message acted on always moves ``lastMessageId``, so
   every message is still recorded before it is acknowledged, exactly as before (docs/listener.md, "Leaving no
   gap"): a successor never re-reads a message its predecessor acted on, and it learns of every acquisition in
   flight. Leaving the cursor behind was the other choice (a successor would re-read a few messages: the desired
   count comes from the statistics and acquisitions are idempotent), but a message acted on is followed by its
   acknowledgement, after which the service never delivers it again: its ``acquiring`` record would be lost.
5. **With a synced watch, the set no longer carries what landed** (the watch shows another ``replicas``,
   ``patchID`` or cursor annotation: someone edited the set, or it was deleted and created again): send, so the
   set converges within one long poll as it did when every decision was re-sent.
6. **Without a synced watch, a refresh is due** (:func:`refresh_due`; a shared listener's member, which does not
   watch, a Role written by an older controller that grants only ``patch``, a watch not listed yet or given
   up): send. Such a listener learns ``status.advertisedCapacity`` and what the set carries only from a patch's
   answer, so it sends the repeat while the last figure holds the set below ``maxRunners`` (the figure may have
   risen since, and a stale one would keep jobs waiting), and otherwise at least every
   :data:`UNWATCHED_REFRESH_SECONDS`, to put back a set someone else edited. Every job event is a patch ID above
   0 (rule 2), so a busy set learns the figure at each one.
7. Otherwise **skip**: the patch would change nothing. The API server does not even write an unchanged object
   (no new ``resourceVersion``, no watch event), so the runner-set controller never saw these repeats.

What a skip gives up, and why that is safe: the runner-set controller evaluates ``patchID`` 0 on every pass of
its own (it scales up if short and removes surplus idle runners whenever it reconciles, woken by its runners'
changes and its resync), so the "force state" signal is level-triggered and needs delivering once; a surplus
runner that appears later (a runner that registered after the signal) is removed by the next pass the runner's
own change causes, not by a repeated patch. With a watch, no timer re-sends it: rule 5 covers the only thing a
repeat used to repair (a set whose spec someone else changed). Without one, rule 6 bounds how long such a set
stays edited, and an over-stated figure costs what ARC always pays (it advertises ``maxRunners``): the service
offers a job the cluster cannot run yet, and its patch ID brings the lower figure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from arc_scaleset.listener.desired_state import ScaleDecision


class Reason(enum.StrEnum):
    """Which rule of the module docstring decided (for logs and tests)."""

    FIRST = "First"
    NEW_PATCH_ID = "NewPatchID"
    DECISION_CHANGED = "DecisionChanged"
    CURSOR_CHANGED = "CursorChanged"
    SET_DIFFERS = "SetDiffers"
    REFRESH = "Refresh"
    UNCHANGED = "Unchanged"


@dataclass(frozen=True)
class SetContent:
    """What the set carries of the listener's publications: ``spec.replicas`` (absent = 0), ``spec.patchID`` and
    the cursor annotation's value (``None``: none; in a publication about to be made, none written, so the set
    keeps what it has)."""

    replicas: int
    patch_id: int
    cursor: str | None


UNWATCHED_REFRESH_SECONDS: Final = 300.0
"""How long a listener without a watch lets a repeated force-state decision go unsent while its set's figure does
not hold it back (rule 6): six of GitHub's 50-second long polls."""

ABSENT: Final = SetContent(replicas=-1, patch_id=-1, cursor=None)
"""What a synced watch shows when the set does not exist: differs from any publication (rule 5)."""


@dataclass(frozen=True)
class PublishPlan:
    """``send``: patch the set; ``reason``: the rule that decided."""

    send: bool
    reason: Reason


def content_of(decision: ScaleDecision, cursor: str | None) -> SetContent:
    """What patching ``decision`` with the cursor annotation ``cursor`` leaves on the set."""
    return SetContent(replicas=decision.target, patch_id=decision.patch_id, cursor=cursor)


def refresh_due(*, since_landed: float, capacity: int | None, max_runners: int) -> bool:
    """Whether a listener without a watch sends its repeated decision anyway (rule 6): the last patch's answer gave
    a ``capacity`` below ``max_runners``, or it landed :data:`UNWATCHED_REFRESH_SECONDS` or more ago
    (``since_landed``, seconds)."""
    held_back = capacity is not None and capacity < max_runners
    return held_back or since_landed >= UNWATCHED_REFRESH_SECONDS


def plan_publish(
    wanted: SetContent, *, landed: SetContent | None, watched: SetContent | None, refresh_due: bool
) -> PublishPlan:
    """Whether to patch ``wanted`` onto the set, given what the set carried after the last patch that ``landed``
    (its answer; ``None``: none yet in this process), what a synced watch of the set shows (``None``: no watch,
    or not synced; :data:`ABSENT`: the set does not exist) and, for a listener without a synced watch, whether
    :func:`refresh_due`. See the module docstring for the rules."""
    if landed is None:
        return PublishPlan(send=True, reason=Reason.FIRST)
    if wanted.patch_id != 0:
        return PublishPlan(send=True, reason=Reason.NEW_PATCH_ID)
    if (wanted.replicas, wanted.patch_id) != (landed.replicas, landed.patch_id):
        return PublishPlan(send=True, reason=Reason.DECISION_CHANGED)
    if wanted.cursor is not None and wanted.cursor != landed.cursor:
        return PublishPlan(send=True, reason=Reason.CURSOR_CHANGED)
    if watched is not None and watched != landed:
        return PublishPlan(send=True, reason=Reason.SET_DIFFERS)
    if watched is None and refresh_due:
        return PublishPlan(send=True, reason=Reason.REFRESH)
    return PublishPlan(send=False, reason=Reason.UNCHANGED)

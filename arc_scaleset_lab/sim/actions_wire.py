"""The Actions service's JSON for a runner scale set and a message session, as the real service shapes them.

Pure renderings of the model: the statistics in them are computed from the state at the moment of the call.
"""

from __future__ import annotations

from typing import Any

from arc_scaleset_lab.sim.address import SimAddress
from arc_scaleset_lab.sim.state import ScaleSet, Session, SimState, rfc3339


def scale_set_json(state: SimState, address: SimAddress, scale_set: ScaleSet) -> dict[str, Any]:
    base = address.tenant_url(scale_set.tenant_id)
    return {
        "id": scale_set.id,
        "name": scale_set.name,
        "runnerGroupId": scale_set.runner_group_id,
        "runnerGroupName": scale_set.runner_group_name,
        "labels": [dict(label) for label in scale_set.labels],
        "RunnerSetting": {"disableUpdate": True} if scale_set.disable_update else {},
        "createdOn": rfc3339(scale_set.created_on),
        "runnerJitConfigUrl": f"{base}_apis/runtime/runnerscalesets/{scale_set.id}/generatejitconfig",
        "statistics": state.statistics(scale_set.id).to_json(),
    }


def session_json(state: SimState, address: SimAddress, session: Session, tenant_id: int) -> dict[str, Any]:
    """A session with its scale set and its message queue: the URL (keeping ``?sessionId=``) and the token."""
    base = address.tenant_url(tenant_id)
    return {
        "sessionId": session.id,
        "ownerName": session.owner,
        "runnerScaleSet": scale_set_json(state, address, state.scale_sets[session.scale_set_id]),
        "messageQueueUrl": (
            f"{base}_apis/runtime/runnerscalesets/{session.scale_set_id}/messages?sessionId={session.id}"
        ),
        "messageQueueAccessToken": session.queue_token,
        "statistics": state.statistics(session.scale_set_id).to_json(),
    }

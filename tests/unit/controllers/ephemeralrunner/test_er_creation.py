"""What creating a runner's pod and JIT Secret came to: the pure outcome the pod step executes."""

from __future__ import annotations

import pytest

from arc_scaleset.controllers.ephemeralrunner.creation import Created, creation_outcome
from arc_scaleset.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid

POD = {"metadata": {"name": "runner-1"}}
QUOTA = Forbidden(403, "Forbidden", 'pods "runner-1" is forbidden: exceeded quota: q, requested: pods=1')
POLICY = Forbidden(403, "Forbidden", 'pods "runner-1" is forbidden: violates PodSecurity "restricted:latest"')
INVALID = Invalid(422, "Invalid", 'Pod "runner-1" is invalid: spec.containers[0].image: Required value')
EXISTS = AlreadyExists(409, "AlreadyExists", 'pods "runner-1" already exists')
BROKEN = Conflict(409, "Conflict", "the object has been modified")


@pytest.mark.parametrize(
    ("pod", "secret_error", "outcome", "pod_created"),
    [
        (POD, None, Created.CREATED, True),
        (EXISTS, None, Created.POD_EXISTS, False),
        (BROKEN, None, Created.POD_FAILED, False),
        (INVALID, None, Created.INVALID, False),
        (POLICY, None, Created.INVALID, False),
        (QUOTA, None, Created.QUOTA_EXCEEDED, False),
        # The Secret's answer comes first: the registration's status changes wait for it either way.
        (POD, AlreadyExists(409, "AlreadyExists", "secret exists"), Created.SECRET_EXISTS, True),
        (INVALID, AlreadyExists(409, "AlreadyExists", "secret exists"), Created.SECRET_EXISTS, False),
        (POD, BROKEN, Created.SECRET_FAILED, True),
        (QUOTA, BROKEN, Created.SECRET_FAILED, False),
    ],
)
def test_creation_outcomes(
    pod: object, secret_error: BaseException | None, outcome: Created, pod_created: bool
) -> None:
    creation = creation_outcome(pod, secret_error)
    assert (creation.outcome, creation.pod_created) == (outcome, pod_created)


def test_a_rejected_pod_is_told_in_arcs_words_with_the_api_servers_message_alone() -> None:
    assert creation_outcome(INVALID, None).message == f"Failed to create the pod: {INVALID.message}"
    assert creation_outcome(QUOTA, None).message == QUOTA.message


def test_a_failure_carries_the_error_to_raise() -> None:
    assert creation_outcome(BROKEN, None).error is BROKEN
    assert creation_outcome(POD, BROKEN).error is BROKEN
    assert creation_outcome(POD, None).error is None

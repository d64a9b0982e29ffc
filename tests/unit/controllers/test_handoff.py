"""What the EphemeralRunnerSet hands to a runner's deletion path: a batch's pods and Secrets are skipped once
deleted, waited for while the batch is deleting them, and deleted by the runner's path when the batch did not;
and what the runner controller hands to the set: the succeeded runners it deletes itself."""

from __future__ import annotations

from arc_scaleset.controllers.handoff import BatchDeletion, DeletedChildren, RemovedRegistrations, RunnerDeletions


def test_a_pod_the_batch_is_deleting_is_pending_until_settled() -> None:
    children = DeletedChildren()
    children.expect("uid-1", "pods")
    assert children.pending("uid-1", "pods")
    assert not children.pending("uid-1", "secrets")
    children.settle("uid-1", "pods", deleted=True)
    assert not children.pending("uid-1", "pods")


def test_a_deleted_object_is_reported_once() -> None:
    children = DeletedChildren()
    children.expect("uid-1", "secrets")
    children.settle("uid-1", "secrets", deleted=True)
    assert children.state("uid-1", "secrets") is BatchDeletion.DELETED
    assert children.state("uid-1", "secrets") is None
    assert len(children) == 0


def test_an_object_the_batch_did_not_delete_is_left_to_the_runner() -> None:
    children = DeletedChildren()
    children.expect("uid-1", "pods")
    children.settle("uid-1", "pods", deleted=False)
    assert children.state("uid-1", "pods") is None
    assert not children.pending("uid-1", "pods")


def test_the_memos_forget_the_oldest_beyond_their_capacity() -> None:
    children = DeletedChildren(capacity=2)
    for uid in ("a", "b", "c"):
        children.expect(uid, "pods")
    assert not children.pending("a", "pods")
    assert children.pending("b", "pods")
    assert children.pending("c", "pods")

    removed = RemovedRegistrations(capacity=1)
    removed.record("a", 1)
    removed.record("b", 2)
    assert not removed.take("a", 1)
    assert removed.take("b", 2)
    assert not removed.take("b", 2)


def test_nothing_is_recorded_without_a_runner_uid_or_id() -> None:
    children, removed = DeletedChildren(), RemovedRegistrations()
    children.expect("", "pods")
    removed.record("", 5)
    removed.record("uid", 0)
    assert len(children) == len(removed) == 0


def test_a_runner_the_runner_controller_deletes_is_its_until_forgotten() -> None:
    deletions = RunnerDeletions()
    deletions.record("uid-1")
    deletions.record("")  # no UID, nothing to tell
    assert deletions.deleting("uid-1")
    assert not deletions.deleting("uid-2")
    assert len(deletions) == 1
    deletions.forget("uid-1")  # its delete failed (the set reaps it again), or its deletion path completed
    assert not deletions.deleting("uid-1")
    deletions.forget("uid-1")

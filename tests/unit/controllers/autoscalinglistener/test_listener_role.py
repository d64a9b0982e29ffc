"""The listener Role (controllers/autoscalinglistener/children.py): exactly its own sets, by name."""

from __future__ import annotations

from arc_scaleset.controllers.autoscalinglistener.children import role_rules


def test_the_listener_may_read_and_watch_only_its_own_sets_by_name() -> None:
    rules = role_rules("set-a", "set-b")
    readers = [rule for rule in rules if {"get", "list", "watch"} & set(rule["verbs"])]
    assert readers == [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunnersets"],
            "resourceNames": ["set-a", "set-b"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert all(rule.get("resourceNames") for rule in rules if "ephemeralrunnersets" in rule["resources"])

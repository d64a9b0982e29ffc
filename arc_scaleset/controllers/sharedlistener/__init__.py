"""The shared listener's reconciler: one listener pod, ServiceAccount, Role, RoleBinding and config Secret for a
group of scale sets (docs/listener.md, "Shared listener"; docs/controllers.md, "Shared listeners").

- :mod:`.members`: which AutoscalingListeners a group serves (pure);
- :mod:`.objects`: the group's objects, built with the per-set listener's builders and policies (pure);
- :mod:`.plan`: what one pass does, from the members and what exists (pure);
- :mod:`.reconciler`: the shell, keyed by group ID and woken by its members' events.
"""

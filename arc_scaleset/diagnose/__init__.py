"""What ``arc-scaleset status`` and ``arc-scaleset explain`` show: one scale set's objects read together
(:mod:`.snapshot`), summarised (:mod:`.summary`) and diagnosed by pure rules (:mod:`.rules`).

Read-only: nothing here writes to the API. docs/observability.md describes the commands.
"""

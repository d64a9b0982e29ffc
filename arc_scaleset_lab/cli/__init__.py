"""The lab's commands, as the ``arc-scaleset`` command line finds them (entry-point group
``arc_scaleset.commands``).

Loading this registry fails with ImportError while the lab's own dependencies (the ``lab`` extra) are
missing, which is how the command line knows the lab is not installed.
"""

from __future__ import annotations

import rich  # noqa: F401  (the lab extra's marker: without it the lab is not installed)

COMMANDS: dict[str, tuple[str, str]] = {
    "cluster": ("arc_scaleset_lab.cli.cluster", "build, start, stop the local Kubernetes control plane"),
    "sim": ("arc_scaleset_lab.cli.sim", "run the simulated GitHub + Actions service"),
    "demo": ("arc_scaleset_lab.demo", "run the whole system on this machine with a simulated workload"),
}

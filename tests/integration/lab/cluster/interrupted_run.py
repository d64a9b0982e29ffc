"""Target of test_interrupt: a test run that starts the control plane and blocks until interrupted.

Not collected by the suite (its name does not start with test_); run explicitly by test_interrupt.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from arc_scaleset_lab.harness.cluster import TestCluster


def test_blocks_until_interrupted(cluster: TestCluster) -> None:
    Path(os.environ["ARC_SCALESET_PIDS_FILE"]).write_text(
        json.dumps({"pids": cluster.pids, "workdir": str(cluster.workdir)})
    )
    signal.pause()  # the outer test sends SIGINT

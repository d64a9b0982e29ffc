"""``arc-scaleset`` run as a user runs it (``kubectl arc``): a separate process pointed at a kubeconfig.

One helper for the tests of the CLI's read-only commands (``status``, ``explain``, ``jobs``), in the
integration and the end-to-end suites alike.
"""

import asyncio
import sys
from pathlib import Path

CLI_TIMEOUT = 60.0


async def run_cli(kubeconfig: Path, *args: str) -> tuple[int, str]:
    """Run ``arc-scaleset <args> --kubeconfig <kubeconfig>``; its exit code and its output (stderr merged)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "arc_scaleset.cli", *args, "--kubeconfig", str(kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT)
    assert process.returncode is not None
    return process.returncode, output.decode()

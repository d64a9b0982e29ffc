"""Child processes of the local control plane: started with a log file, stopped by their own PID.

A process started with ``tie_to_parent=True`` gets ``PR_SET_PDEATHSIG``: the kernel kills it when the
process that started it dies, even by SIGKILL, so an interrupted test run leaves no control plane behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (use as ``preexec_fn``)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    # A zombie child still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def stop_pid(pid: int, *, timeout: float = 10.0) -> None:
    """SIGTERM ``pid``, wait up to ``timeout`` seconds, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class ManagedProcess:
    """One component: its argv, its log file, and its PID once started."""

    def __init__(self, name: str, argv: Sequence[str], *, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def start(self, *, tie_to_parent: bool) -> None:
        executable = Path(self.argv[0])
        if not executable.is_file():
            raise FileNotFoundError(f"{self.name}: binary {executable} is missing (run `arc-scaleset cluster build`)")
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                # Own session: a Ctrl-C in the terminal reaches the parent, which stops children in order.
                start_new_session=True,
                preexec_fn=die_with_parent if tie_to_parent else None,
            )

    def exit_code(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return self._popen.poll() if self._popen else None

    def log_tail(self, lines: int = 20) -> str:
        return tail(self.log_path, lines)

    def stop(self, *, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it still runs after ``timeout`` seconds."""
        self.terminate()
        self.wait_or_kill(deadline=time.monotonic() + timeout)

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM), without waiting."""
        if self._popen is not None and self._popen.poll() is None:
            self._popen.terminate()

    def wait_or_kill(self, *, deadline: float) -> None:
        """Wait for the process to end until ``deadline`` (``time.monotonic()``), then SIGKILL it."""
        if self._popen is None:
            return
        try:
            self._popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait()

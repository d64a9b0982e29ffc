"""Size asyncio's per-connection TLS receive buffer for a process that holds many connections open."""

from __future__ import annotations

from asyncio import sslproto
from typing import Final

TLS_READ_BUFFER: Final = 16 * 1024
"""Bytes each TLS connection reads from its socket at once: one full TLS record, the most a single record
decrypts to. Each connection's buffer is resident while it is open: at 64 KiB the controller's 40 or so
connections to the API server at a scale-up held 2 MB more at its peak (bench/README.md, issue 30)."""


def shrink_tls_read_buffers(size: int = TLS_READ_BUFFER) -> None:
    """Make every TLS connection this process opens from now on read into a ``size``-byte buffer.

    asyncio gives each TLS connection a zero-filled (so resident) 256 KiB receive buffer for as long as it is
    open. The controller keeps one watch connection per cached resource and namespace, plus its pooled
    request connections: about 50 of them, 12 MB of buffers that mostly sit idle (a watch event is a few
    KiB). A smaller buffer only means more reads for a large list response, each one at most a few TLS
    records. Call once, at start-up, before any connection is made; a process-wide setting, as
    :func:`~arc_scaleset.gc_tuning.freeze_startup_objects` is.
    """
    if size < 16 * 1024:
        raise ValueError("the TLS read buffer must hold at least one TLS record (16 KiB)")
    sslproto.SSLProtocol.max_size = size

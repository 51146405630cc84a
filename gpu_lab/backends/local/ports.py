"""Free loopback TCP ports for the control plane's listeners.

A port is chosen once per lab and kept across restarts while it stays free, so
kubeconfigs stay valid. New ports come from 20000-32767: below Linux's ephemeral
range (32768-60999), where outgoing connections would otherwise claim a port that a
restarted component wants back, and above the usual well-known service ports.
"""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Iterable

HOST = "127.0.0.1"
RANGE = (20000, 32767)


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a listener could bind ``host:port`` now.

    ``SO_REUSEADDR`` is set as Go's ``net.Listen`` sets it, so a port that only has
    connections in TIME_WAIT counts as free (etcd and the Kubernetes servers can bind it).
    """
    if not 0 < port < 65536:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                return False
            raise
    return True


def pick_port(
    preferred: int | None = None,
    avoid: Iterable[int] = (),
    host: str = HOST,
    rng: random.Random | None = None,
    attempts: int = 200,
) -> int:
    """``preferred`` if it is free and not in ``avoid``, else a free port from :data:`RANGE`
    (falling back to one the kernel hands out)."""
    taken = set(avoid)
    if preferred and preferred not in taken and port_free(preferred, host):
        return preferred
    r = rng or random.SystemRandom()
    for _ in range(attempts):
        port = r.randint(*RANGE)
        if port not in taken and port_free(port, host):
            return port
    for _ in range(attempts):  # a crowded range: let the kernel choose
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port
    raise OSError(errno.EADDRINUSE, f"no free TCP port on {host}")

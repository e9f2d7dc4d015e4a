"""Free TCP ports on this machine (simulated fleets, tests, benchmarks)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now. The kernel may hand it out again once the probe socket is
    closed, so bind it promptly; servers that can bind port 0 themselves should do that instead."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])

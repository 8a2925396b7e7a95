"""Where an endpoint is: on loopback, on this machine, or beyond it."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def stays_local(url: str) -> bool:
    """Whether a request to `url` stays on this machine: a loopback host, or a one-label name
    such as the stack's internal service names (`http://llama:8080`). Anything else, a LAN
    address included, leaves it."""
    host = urlsplit(url).hostname or ""
    return is_loopback(host) or ("." not in host and ":" not in host and bool(host))

"""Which server a URL names: two spellings of one endpoint are one server.

    endpoint_key("http://localhost:8000/v1/") == endpoint_key("http://127.0.0.1:8000")   # True

The key is the scheme, the host (lower case; every loopback name and address, `localhost`, 127.0.0.0/8, ::1,
is one host), the port (the scheme's default when none is given) and the path without trailing slashes or a
trailing /v1 (the OpenAI-compatible API's prefix: with or without it, the URL names one server). Credentials, query and
fragment do not name another server. Names other than loopback are not resolved (no lookup is made): two names
of one remote host are not recognised as one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from eval.errors import ConfigError
from eval.redact import safe_url

MAX_REPLICAS = 64  # servers of one variant: --base-url repeated, a spec's url list or replicas, dp ranks
DEFAULT_PORTS = {"http": 80, "https": 443}
LOOPBACK = "loopback"  # the key's host for every loopback name and address
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _host(host: str) -> str:
    host = host.lower().rstrip(".")
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return LOOPBACK
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    mapped = getattr(address, "ipv4_mapped", None)
    return LOOPBACK if address.is_loopback or (mapped is not None and mapped.is_loopback) else str(address)


def endpoint_key(url: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port, path) of the server `url` names (module docstring); a URL that does not parse is
    its own text."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ("", url, None, "")
    scheme = parts.scheme.lower()
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")].rstrip("/")
    return (scheme, _host(parts.hostname or ""), port or DEFAULT_PORTS.get(scheme), path)


def refuse_repeated_endpoints(urls: Sequence[str], where: str = "") -> None:
    """Replicas are distinct servers: one server given twice (by any spelling) would share its prefix cache
    across "replicas", and `--cold reset` on one would empty the other's. ConfigError naming both spellings
    and how many times the server was given (`where`: the spec field listing them, else the command line's)."""
    first: dict[tuple[str, str, int | None, str], int] = {}
    for i, url in enumerate(urls):
        key = endpoint_key(url)
        if key not in first:
            first[key] = i
            continue
        j = first[key]
        times = sum(1 for u in urls if endpoint_key(u) == key)
        raise ConfigError(
            f"{where + ': ' if where else ''}replicas {j} ({safe_url(urls[j])}) and {i} ({safe_url(url)}) are one server, given {times} times: "
            "each replica must be its own server; give each server's URL once (a routing endpoint: dp_ranks)"
        )

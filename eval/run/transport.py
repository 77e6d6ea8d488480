"""The deadline transport: an httpx2 transport whose sockets bound every connect, write and read by the time left
to the deadline of the request in flight on that thread (`request_deadline`), so `timeout_s` (`lbeval run
--timeout`) bounds the WHOLE request, from connect through sending to the last byte of the body or stream, not
each read: a server that trickles a byte just before every read timeout still ends at the deadline. Connecting
has its own, shorter bound (`CONNECT_S`). The transport honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY itself
(`environment_proxy`), as httpx would without a custom transport.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2

from eval.errors import ConfigError
from eval.redact import safe_url

_DEADLINE: ContextVar[float | None] = ContextVar("lbeval_request_deadline", default=None)  # time.monotonic()
_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)  # the openai package's defaults
CONNECT_S = 10.0


@contextmanager
def request_deadline(at: float) -> Iterator[float]:
    """This thread's request deadline (a time.monotonic() value) for the `with` block: what DeadlineStream obeys."""
    token = _DEADLINE.set(at)
    try:
        yield at
    finally:
        _DEADLINE.reset(token)


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` bounded by the time left to this thread's request deadline; raises `expired` when none is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the whole-request deadline has passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write waits at most until the deadline of the request using it."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore2's sync sockets, connected within the request deadline and wrapped in DeadlineStream."""

    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return DeadlineStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url`: HTTP_PROXY or HTTPS_PROXY (by the URL's scheme, either case),
    unless NO_PROXY (or no_proxy) lists its host (`_no_proxy`); None for a direct connection. The variables curl,
    requests and httpx read; a CIDR range in NO_PROXY is not matched."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy or _no_proxy(parts.hostname or "", proxies.get("no", "")):
        return None
    return proxy


def _no_proxy(host: str, no_proxy: str) -> bool:
    """NO_PROXY lists `host`: `*`, the host itself, or a domain it is under (`example.com`, `.example.com`);
    a port after an entry is ignored (every port of that host)."""
    host = host.lower().strip("[]")
    for entry in no_proxy.split(","):
        name = entry.strip().lower()
        if name.count(":") == 1:  # host:port (an IPv6 address has more colons)
            name = name.split(":")[0]
        name = name.strip("[]").lstrip(".")
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


def shared_ssl_context() -> ssl.SSLContext:
    """The verifying SSL context every transport of the process shares (an SSLContext serves many connections
    and threads): reading the CA store takes about 0.1 s, and each transport made two, so a session on N
    replicas spent 0.4 s per Client before its first request. Another SSL_CERT_FILE or SSL_CERT_DIR in the
    environment gets a context of its own (httpx2 reads them)."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=8)
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    del cert_file, cert_dir  # the cache's key: httpx2 reads them from the environment
    return httpx2.create_ssl_context()


class TLSOnDemandPool(httpcore2.ConnectionPool):
    """httpcore2's connection pool, taking the shared verifying SSL context (`shared_ssl_context`) when it first
    connects over TLS: a client of plain-http servers never reads the CA store (about 0.1 s a process)."""

    def create_connection(self, origin: httpcore2.Origin) -> httpcore2.ConnectionInterface:
        if origin.scheme == b"https" and self._ssl_context is None:
            self._ssl_context = shared_ssl_context()
        return super().create_connection(origin)


class DeadlineTransport(httpx2.HTTPTransport):
    """httpx2's HTTP transport over a connection pool of DeadlineStreams, through `proxy` when one is given
    (`environment_proxy`). httpx2 has no public way to give the pool it builds a network backend, so its
    `__init__`, which only builds that pool (and an SSL context for it), is not called: the pool is one of ours
    with our backend (a TLSOnDemandPool; through a proxy, an HTTPProxy built as httpx2 builds it)."""

    def __init__(self, proxy: str | None = None) -> None:
        if proxy is None:
            self._pool = TLSOnDemandPool(
                ssl_context=None,
                max_connections=_LIMITS.max_connections,
                max_keepalive_connections=_LIMITS.max_keepalive_connections,
                keepalive_expiry=_LIMITS.keepalive_expiry,
                network_backend=DeadlineBackend(),
            )
            return
        via = httpx2.Proxy(url=proxy)
        if via.url.scheme not in ("http", "https"):
            raise ConfigError(
                f"proxy {safe_url(proxy)} (from the environment): only http:// and https:// proxies"
            )
        self._pool = httpcore2.HTTPProxy(
            proxy_url=httpcore2.URL(
                scheme=via.url.raw_scheme, host=via.url.raw_host, port=via.url.port, target=via.url.raw_path
            ),
            proxy_auth=via.raw_auth,
            proxy_headers=via.headers.raw,
            proxy_ssl_context=via.ssl_context,
            ssl_context=shared_ssl_context(),
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=DeadlineBackend(),
        )


# every read/write/pool wait is bounded by the deadline (no separate per-read timeout): such a timeout is it
DEADLINE_ERRORS = (httpx2.ReadTimeout, httpx2.WriteTimeout, httpx2.PoolTimeout)
TRANSPORT_ERRORS = (httpx2.TransportError, httpx2.StreamError, OSError)

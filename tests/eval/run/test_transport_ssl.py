"""The deadline transport's SSL context (eval/run/transport.py): one verifying context shared by every transport of
the process, so a session on N replicas does not read the CA store four times per Client, and taken only when a
connection is made over TLS, so a client of plain-http servers never reads it."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpcore2
import pytest

from eval.run import transport
from eval.run.client import Client
from eval.run.transport import DeadlineTransport, shared_ssl_context
from tests.eval.fake_fixtures import fake_fixture  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer


def _contexts(transport: DeadlineTransport) -> ssl.SSLContext:
    context = transport._pool._ssl_context  # what the pool's connections wrap with
    assert isinstance(context, ssl.SSLContext)
    return context


@pytest.fixture(name="no_ca_settings")
def _no_ca_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    transport._ssl_context.cache_clear()  # the CA store is read afresh: each test counts its own reads
    yield
    transport._ssl_context.cache_clear()


def test_every_transport_shares_one_verifying_context(no_ca_settings: None) -> None:
    one, two = DeadlineTransport(), DeadlineTransport(proxy="http://proxy.invalid:3128")
    one._pool.create_connection(
        httpcore2.Origin(b"https", b"server.invalid", 443)
    )  # its first TLS connection
    assert _contexts(one) is _contexts(two) is shared_ssl_context()
    assert shared_ssl_context().verify_mode == ssl.CERT_REQUIRED and shared_ssl_context().check_hostname


def test_a_client_of_a_plain_http_server_never_reads_the_ca_store(
    no_ca_settings: None, fake: FakeServer
) -> None:
    with Client(fake.base_url) as client:
        assert client.version() == fake.version and client.models()
    assert transport._ssl_context.cache_info().misses == 0


def test_another_ca_setting_gets_its_own_context(
    monkeypatch: pytest.MonkeyPatch, no_ca_settings: None
) -> None:
    default = shared_ssl_context()
    monkeypatch.setenv("SSL_CERT_DIR", "/nonexistent-ca-dir")
    assert shared_ssl_context() is not default

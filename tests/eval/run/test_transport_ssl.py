"""The deadline transport's SSL context (eval/run/transport.py): one verifying context shared by every transport of
the process, so a session on N replicas does not read the CA store four times per Client."""

from __future__ import annotations

import ssl

import pytest

from eval.run.transport import DeadlineTransport, shared_ssl_context


def _contexts(transport: DeadlineTransport) -> ssl.SSLContext:
    context = transport._pool._ssl_context  # what the pool's connections wrap with
    assert isinstance(context, ssl.SSLContext)
    return context


def test_every_transport_shares_one_verifying_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    one, two = DeadlineTransport(), DeadlineTransport(proxy="http://proxy.invalid:3128")
    assert _contexts(one) is _contexts(two) is shared_ssl_context()
    assert shared_ssl_context().verify_mode == ssl.CERT_REQUIRED and shared_ssl_context().check_hostname


def test_another_ca_setting_gets_its_own_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    default = shared_ssl_context()
    monkeypatch.setenv("SSL_CERT_DIR", "/nonexistent-ca-dir")
    assert shared_ssl_context() is not default

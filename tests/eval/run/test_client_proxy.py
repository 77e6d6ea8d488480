"""The deadline transport honours HTTP(S)_PROXY and NO_PROXY: a small forwarding proxy on
loopback, started by the test, sees every request of a Client unless NO_PROXY names the server's host."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from eval.errors import ConfigError
from eval.run.client import Client
from eval.run.request import RequestSettings, build_request
from eval.run.transport import environment_proxy
from tests.eval.fake_fixtures import fake_fixture, make_row  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")


class _Forward(http.server.BaseHTTPRequestHandler):
    """A plain-HTTP forward proxy: the request line holds the absolute URL; forwarded as is, answer relayed."""

    seen: list[str]

    def _forward(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "connection")
        }
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        conn.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body, headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_POST = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(name="proxy")
def proxy_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[str]]]:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    seen: list[str] = []
    handler = type("Forward", (_Forward,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def exercise(fake: FakeServer) -> None:
    """One GET through the plain client and one completion through the openai client (both transports)."""
    with Client(fake.base_url, timeout_s=60) as client:
        assert client.models()
        row = make_row(0)
        req = build_request(
            row, RequestSettings(), model=client.models()[0]["id"], cache_salt=None, stream=False
        )
        assert client.send("chat", req).token_ids


def test_http_proxy_carries_every_request(
    fake: FakeServer, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", url)
    exercise(fake)
    root = fake.base_url.removesuffix("/v1")
    assert f"GET {root}/v1/models" in seen
    assert f"POST {root}/v1/chat/completions" in seen


def test_no_proxy_bypasses_it(
    fake: FakeServer, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = proxy
    monkeypatch.setenv("http_proxy", url)
    monkeypatch.setenv("NO_PROXY", "example.com, 127.0.0.1")
    exercise(fake)
    assert seen == []


def test_without_proxy_variables_the_connection_is_direct(
    fake: FakeServer, proxy: tuple[str, list[str]]
) -> None:
    exercise(fake)
    assert proxy[1] == []


@pytest.mark.parametrize(
    ("env", "url", "expected"),
    [
        ({"HTTP_PROXY": "http://p:3128"}, "http://h:8000/v1", "http://p:3128"),
        ({"HTTP_PROXY": "http://p:3128"}, "https://h/v1", None),  # HTTPS_PROXY is the https one
        ({"HTTPS_PROXY": "http://p:3128"}, "https://h/v1", "http://p:3128"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "*"}, "http://h/v1", None),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": ".corp.example"}, "http://a.corp.example/v1", None),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "corp.example"}, "http://a.corp.example/v1", None),
        (
            {"HTTP_PROXY": "http://p:3128", "NO_PROXY": "corp.example"},
            "http://notcorp.example/v1",
            "http://p:3128",
        ),
        ({"HTTP_PROXY": "http://p:3128", "no_proxy": "h:8000"}, "http://h:8000/v1", None),
    ],
)
def test_environment_proxy(
    env: dict[str, str], url: str, expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment_proxy(url) == expected


def test_a_socks_proxy_is_one_config_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", "socks5://user:secret@p:1080")
    with pytest.raises(ConfigError, match="only http:// and https:// proxies") as err:
        Client("http://h:8000/v1")
    assert "secret" not in str(err.value)

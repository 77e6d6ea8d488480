"""Replicas are distinct servers: one server given twice, by any spelling of its URL, is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import EXIT_CONFIG
from eval.serve.endpoints import endpoint_key
from tests.eval.fake_fixtures import make_row, write_rows
from tests.support.fake_server import FakeServer


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("http://127.0.0.1:8000/v1", "http://localhost:8000/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1", "HTTP://LocalHost:8000//v1//"),
        ("http://[::1]:8000/v1", "http://127.0.0.2:8000/v1"),
        ("http://host.example/v1", "http://host.example:80/v1"),
        ("https://host.example/v1", "https://user:pw@host.example:443/v1?x=1"),
    ],
)
def test_spellings_of_one_server_have_one_key(one: str, other: str) -> None:
    assert endpoint_key(one) == endpoint_key(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"),
        ("http://127.0.0.1:8000/v1", "https://127.0.0.1:8000/v1"),
        ("http://host.example/v1", "http://host.example:8080/v1"),
        ("http://h1.example:8000/v1", "http://h2.example:8000/v1"),
        ("http://127.0.0.1:8000/a/v1", "http://127.0.0.1:8000/b/v1"),
    ],
)
def test_other_servers_have_other_keys(one: str, other: str) -> None:
    assert endpoint_key(one) != endpoint_key(other)


def _run(tmp_path: Path, urls: list[str], *more: str) -> int:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(3)])
    given = [a for u in urls for a in ("--base-url", u)]
    return main(
        ["run", "--variant", "v", "--inputs", str(inputs), *given, "--out", str(tmp_path / "runs"),
         "--passes", "cold,warm", "--scenarios", "cache", "--quiet", *more]
    )  # fmt: skip


@pytest.mark.parametrize(
    "spell",
    [
        lambda port: [f"http://127.0.0.1:{port}/v1", f"http://localhost:{port}/v1"],
        lambda port: [f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/v1/"],
        lambda port: [f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}"],
    ],
)
def test_one_server_given_as_two_replicas_is_refused_naming_both_spellings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spell: object
) -> None:
    with FakeServer() as s:
        port = s.base_url.rsplit(":", 1)[1].split("/")[0]
        urls = spell(port)  # type: ignore[operator]
        assert _run(tmp_path, urls, "--cold", "reset") == EXIT_CONFIG
        assert not s.requests and s.reset_calls == 0  # refused before anything is sent
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one server" in err[0], err
    assert urls[0] in err[0] and urls[1] in err[0]
    assert not (tmp_path / "runs").exists()  # nothing created


def test_65_copies_of_one_url_are_refused_as_duplicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeServer() as s:
        assert _run(tmp_path, [s.base_url] * 65) == EXIT_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one server, given 65 times" in err[0], err
    assert "differs from replica 0" not in err[0]


def test_ab_refuses_one_server_given_twice_on_one_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(2)])
    with FakeServer() as s, FakeServer() as t:
        port = s.base_url.rsplit(":", 1)[1].split("/")[0]
        code = main(
            ["ab", "x", "y", "--inputs", str(inputs), "--base-url-a", s.base_url, "--base-url-a",
             f"http://localhost:{port}/v1", "--base-url-b", t.base_url, "--base-url-b", s.base_url,
             "--out", str(tmp_path / "runs"), "--scenarios", "cache", "--quiet"]
        )  # fmt: skip
        assert code == EXIT_CONFIG and not s.requests and not t.requests
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one server" in err[0] and f"localhost:{port}" in err[0], err

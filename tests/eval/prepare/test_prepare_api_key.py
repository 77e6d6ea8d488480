"""`lbeval prepare --api-key-env VAR`: a server that wants an API key tokenizes with it (as `lbeval run`); without
one, a 401 is one line naming the option; the key is never printed or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.cli import main
from tests.support.fake_server import FakeServer

KEY = "sk-prepare-secret-1234"


def _argv(data_dir: Path, url: str, out: Path, *extra: str) -> list[str]:
    return ["prepare", "--data-dir", str(data_dir), "--datasets", "qasper", "--n", "2", "--base-url", url,
            "--out", str(out), *extra]  # fmt: skip


def test_prepare_sends_the_api_key_of_api_key_env(
    fixture_data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LBEVAL_TEST_KEY", KEY)
    out = tmp_path / "in.jsonl"
    with FakeServer(api_key=KEY, max_model_len=200) as fake:
        assert main(_argv(fixture_data_dir, fake.base_url, out, "--api-key-env", "LBEVAL_TEST_KEY")) == 0
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err and KEY not in out.read_text()
    assert "wrote 2 inputs" in printed.out


def test_a_401_is_one_line_naming_the_option(
    fixture_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeServer(api_key=KEY) as fake:
        assert main(_argv(fixture_data_dir, fake.base_url, tmp_path / "in.jsonl")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "HTTP 401" in err[0] and "--api-key-env" in err[0]
    assert not (tmp_path / "in.jsonl").exists()


def test_an_unset_api_key_variable_is_one_line(
    fixture_data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("LBEVAL_TEST_KEY", raising=False)
    with FakeServer(api_key=KEY) as fake:
        code = main(
            _argv(fixture_data_dir, fake.base_url, tmp_path / "in.jsonl", "--api-key-env", "LBEVAL_TEST_KEY")
        )
    assert code == 78
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "lbeval prepare: error: --api-key-env LBEVAL_TEST_KEY: that environment variable is not set"
    ]

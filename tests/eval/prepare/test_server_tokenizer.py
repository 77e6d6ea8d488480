"""`lbeval prepare --base-url`: the running server's /tokenize and /detokenize drive truncation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import read_inputs
from eval.prepare.tokenizers import ServerTokenizer, chat_overhead
from tests.support.fake_server import CHAT_PREFIX, CHAT_SUFFIX, FakeServer, detokenize, tokenize_text

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = json.loads((ROOT / "prompts" / "dataset2prompt.json").read_text(encoding="utf-8"))


def test_server_tokenizer_speaks_vllm_endpoints() -> None:
    with FakeServer(model="m1", max_model_len=300) as fake:
        tok = ServerTokenizer(fake.base_url)
        assert tok.model == "m1"
        assert tok.encode("t5 t6\nt7") == [5, 6, 198, 7]
        assert tok.decode([5, 6]) == " t5 t6"
        assert chat_overhead(tok) == len(CHAT_PREFIX) + len(CHAT_SUFFIX)
        assert tok.describe() == {
            "kind": "server",
            "base_url": fake.base_url,
            "model": "m1",
            "max_model_len": 300,
        }


def test_prepare_truncates_with_server_tokenizer(fixture_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "in.jsonl"
    with FakeServer(max_model_len=100) as fake:
        code = main(
            [
                "prepare",
                "--data-dir",
                str(fixture_data_dir),
                "--datasets",
                "qasper",
                "--n",
                "3",
                "--seed",
                "4",
                "--base-url",
                fake.base_url,
                "--max-tokens",
                "qasper=16",
                "--out",
                str(out),
            ]
        )
    assert code == 0
    header, rows = read_inputs(out)
    budget = 100 - 16 - (len(CHAT_PREFIX) + len(CHAT_SUFFIX))
    assert header.max_input_tokens == {"qasper": budget}
    assert header.tokenizer.kind == "server"
    src = {
        r["_id"]: r
        for r in map(json.loads, (fixture_data_dir / "data" / "qasper.jsonl").read_text().splitlines())
    }
    for row in rows:
        ids = tokenize_text(
            TEMPLATES["qasper"].format(context=src[row.id]["context"], input=src[row.id]["input"])
        )
        assert len(ids) > budget and row.truncated
        half = budget // 2
        assert row.prompt == detokenize(ids[:half]) + detokenize(ids[-half:])
        assert row.prompt_tokens == len(tokenize_text(row.prompt))


def test_unreachable_server_is_a_one_line_error() -> None:
    with FakeServer() as fake:
        url = fake.base_url
    with pytest.raises(LbevalError, match="cannot list models"):
        ServerTokenizer(url, timeout=2)


def test_prepare_with_managed_spec_starts_and_stops_the_server(
    fixture_data_dir: Path, tmp_path: Path
) -> None:
    """`lbeval prepare --spec NAME`: the spec's server (the fake vLLM as a child process) tokenizes, then stops."""
    import sys
    import urllib.request

    code = (
        "import sys, time; from tests.support.fake_server import FakeServer; s = FakeServer(max_model_len=100); "
        "s.port = int(sys.argv[1]); s.start(); print('fake up', flush=True); time.sleep(3600)"
    )
    log = tmp_path / "server.log"
    specs = tmp_path / "specs.toml"
    specs.write_text(
        f'[variants.fakevllm]\ncommand = [{sys.executable!r}, "-c", {code!r}]\nargs = ["{{port}}"]\n'
        f'env = {{ PYTHONPATH = {str(ROOT)!r} }}\nlog = {str(log)!r}\nmodel = "fake-model"\n'
    )
    out = tmp_path / "in.jsonl"
    argv = ["prepare", "--data-dir", str(fixture_data_dir), "--datasets", "qasper", "--n", "2", "--seed", "4"]
    assert (
        main(
            [
                *argv,
                "--spec",
                "fakevllm",
                "--specs",
                str(specs),
                "--max-tokens",
                "qasper=16",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    header, rows = read_inputs(out)
    assert header.tokenizer.kind == "server" and header.tokenizer.model == "fake-model"
    assert header.max_input_tokens == {"qasper": 100 - 16 - (len(CHAT_PREFIX) + len(CHAT_SUFFIX))}
    assert all(r.truncated for r in rows)
    url = header.tokenizer.base_url
    assert url is not None
    with pytest.raises(OSError):
        urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2)


def test_prepare_refuses_two_tokenizer_sources(
    fixture_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "prepare",
        "--data-dir",
        str(fixture_data_dir),
        "--no-truncate",
        "--spec",
        "x",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == ConfigError.exit_code
    assert "choose exactly one of --base-url, --spec, --tokenizer, --no-truncate" in capsys.readouterr().err

"""`lbeval prepare --base-url` against llama-cpp-python: /extras/tokenize when /tokenize is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import ConfigError
from eval.prepare.inputs import read_inputs
from eval.prepare.tokenizers import ServerTokenizer, chat_overhead
from tests.support.fake_server import CHAT_PREFIX, CHAT_SUFFIX, FakeServer


def test_the_extras_endpoints_and_the_chat_count_from_usage() -> None:
    with FakeServer(dialect="llama-cpp-python", model="/m.gguf") as fake:
        tok = ServerTokenizer(fake.base_url)
        assert tok.model == "/m.gguf" and tok.max_model_len() is None  # it reports no context length
        assert tok.encode("t5 t6\nt7") == [5, 6, 198, 7]
        assert tok.decode([5, 6]) == " t5 t6"
        assert chat_overhead(tok) == len(CHAT_PREFIX) + len(CHAT_SUFFIX)  # usage.prompt_tokens of a chat call
        assert "llama-cpp-python" in tok.describe()["endpoints"]


def test_prepare_needs_the_context_length_and_then_truncates(
    fixture_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "in.jsonl"
    argv = ["prepare", "--data-dir", str(fixture_data_dir), "--datasets", "qasper", "--n", "2"]
    with FakeServer(dialect="llama-cpp-python", model="/m.gguf") as fake:
        argv += ["--base-url", fake.base_url, "--max-tokens", "qasper=16", "--out", str(out)]
        assert main(argv) == ConfigError.exit_code
        assert "--max-model-len" in capsys.readouterr().err
        assert main([*argv, "--max-model-len", "100"]) == 0
    header, rows = read_inputs(out)
    assert header.tokenizer.kind == "server" and all(r.prompt_tokens is not None for r in rows)
    assert header.max_input_tokens == {"qasper": 100 - 16 - (len(CHAT_PREFIX) + len(CHAT_SUFFIX))}

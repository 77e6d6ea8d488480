"""`lbeval prepare --base-url`: the running server's /tokenize and /detokenize drive truncation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import LbevalError
from eval.inputs import read_inputs
from eval.prompting import ServerTokenizer, chat_overhead
from tests.fake_server import CHAT_PREFIX, CHAT_SUFFIX, FakeServer, detokenize, tokenize_text

ROOT = Path(__file__).resolve().parents[2]
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
    assert header.tokenizer["kind"] == "server"
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

"""The real-server tests' inputs: `lbeval prepare` on the shipped LongBench-format mini sample (qasper and
gov_report), truncated by a built model's own tokenizer (from LBEVAL_CACHE) or by a running server's."""

from __future__ import annotations

from pathlib import Path

from eval.cli import main
from eval.serve.launch_specs import default_cache_dir

SMOLLM2 = "smollm2-135m-instruct"


def prepare_mini(
    out: Path, *, n: int = 1, model: str = SMOLLM2, base_url: str | None = None, extra: tuple[str, ...] = ()
) -> Path:
    """Write `out` (inputs.jsonl) with n inputs of each dataset; with base_url the server's tokenizer truncates,
    otherwise the built model's at --max-model-len 4096. A failed prepare fails the calling test."""
    argv = ["prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", str(n)]
    if base_url is not None:
        argv += ["--base-url", base_url]
    else:
        argv += ["--max-model-len", "4096", "--tokenizer", str(default_cache_dir() / "models" / model)]
    assert main([*argv, *extra, "--out", str(out)]) == 0, f"lbeval prepare failed: {argv}"
    return out

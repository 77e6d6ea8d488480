"""Build a speculative draft for the embedded server: SmolLM2-135M-Instruct's own first layers.

Runs with the *server* venv's python (`make server-draft`, after `make server-model`):

    $(SERVER_PY) -m eval.serve.model_draft --target ~/.cache/lbeval/models/smollm2-135m-instruct \
        --out ~/.cache/lbeval/models/smollm2-135m-draft-l4

The draft is the target's embedding, its first LAYERS decoder layers, its final norm and its (tied) output
matrix, sliced from the target's safetensors: the same tokenizer and vocabulary, so vLLM's `draft_model` method
can propose tokens the target then verifies, and (unlike a random draft) some of them are accepted. Nothing is
downloaded or trained. Like eval/serve/model.py it builds beside the target folder, renames into place and writes
`lbeval-model.json` last; re-running skips when the stamp matches the recipe and the files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from eval.serve.model import check_or_build, sha256_file, staged_build
from eval.terminal import echo

RECIPE_VERSION = 1
LAYERS = 4  # of SmolLM2-135M's 30
COPIED = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def recipe(target: Path) -> dict[str, Any]:
    weights = target / "model.safetensors"
    return {
        "recipe_version": RECIPE_VERSION,
        "layers": LAYERS,
        "target_weights_sha256": sha256_file(weights) if weights.is_file() else None,
    }


def keep(name: str) -> bool:
    """Every tensor but those of decoder layers LAYERS and above."""
    parts = name.split(".")
    if len(parts) > 2 and parts[:2] == ["model", "layers"] and parts[2].isdigit():
        return int(parts[2]) < LAYERS
    return True


def slice_weights(target: Path, out: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(target / "model.safetensors"))
    save_file({k: v.contiguous() for k, v in tensors.items() if keep(k)}, str(out / "model.safetensors"))
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    config["num_hidden_layers"] = LAYERS
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name in (*COPIED, "generation_config.json"):
        if (target / name).is_file():
            shutil.copy2(target / name, out / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build a draft from SmolLM2's first layers.")
    parser.add_argument("--out", required=True, type=Path, help="the draft folder to build or check")
    parser.add_argument("--target", required=True, type=Path, help="the SmolLM2 model folder")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a build is needed")
    args = parser.parse_args(argv)
    out: Path = args.out.expanduser().resolve()
    target: Path = args.target.expanduser().resolve()
    if not (target / "model.safetensors").is_file():
        echo(f"server-draft: {target} has no model.safetensors: run `make server-model` first")
        return 1
    want = recipe(target)
    return check_or_build(
        "server-draft", out, want, args.check,
        lambda: staged_build(out, want, lambda staged: slice_weights(target, staged), ".lbeval-draft-"),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

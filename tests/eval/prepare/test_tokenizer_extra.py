"""`lbeval prepare --tokenizer PATH` without `transformers`: one line naming the `tokenizer` extra (exit 78), and
the extra declared in pyproject.toml with what the code imports."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from eval.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]


def test_tokenizer_without_transformers_names_the_extra(
    fixture_data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    argv = ["prepare", "--data-dir", str(fixture_data_dir), "--datasets", "gov_report", "--n", "1",
            "--tokenizer", str(tmp_path / "tok"), "--max-model-len", "80", "--out", str(tmp_path / "in.jsonl")]  # fmt: skip
    assert main(argv) == 78
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lbeval[tokenizer]" in err[0] and "transformers" in err[0], err
    assert not (tmp_path / "in.jsonl").exists()


# distribution name -> the module it is imported as, where the two differ
IMPORT_NAMES = {"rouge-score": "rouge_score"}
# third-party modules imported by code that runs in the server's environment, not lbeval's: the engine fault
# plugin (installed into the vLLM venv), `make server-model`'s GGUF conversion (eval/serve/model.py) and
# `make server-hybrid`'s seeded model (eval/serve/model_hybrid.py) and `make server-draft`'s sliced draft
SERVER_SIDE = {"torch", "vllm", "transformers", "safetensors"}


def third_party_imports(package: str, skip: tuple[str, ...] = ()) -> set[str]:
    found: set[str] = set()
    root = ROOT / package
    for path in root.rglob("*.py") if root.is_dir() else [root]:
        if any(str(path.relative_to(ROOT)).startswith(s) for s in skip):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found |= {n.split(".")[0] for n in names}
    return {
        n for n in found if n not in sys.stdlib_module_names and n not in {"eval", "scorers", "__future__"}
    }


def declared(requirements: list[str]) -> set[str]:
    names = {re.split(r"[<>=;\[ ]", d, maxsplit=1)[0].strip() for d in requirements}
    return {IMPORT_NAMES.get(n, n) for n in names}


def test_dependencies_are_declared_as_imported() -> None:
    """Every runtime dependency is imported by eval/ or scorers/, and everything they import is declared: a
    runtime dependency, or the `tokenizer` extra (transformers, imported only by `prepare --tokenizer PATH`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = declared(project["dependencies"])
    tokenizer = declared(project["optional-dependencies"]["tokenizer"])
    lbeval_side = third_party_imports(
        "eval", ("eval/serve/faults/", "eval/serve/model")
    ) | third_party_imports("scorers")
    assert runtime == lbeval_side - {"transformers"}  # nothing declared unused, nothing imported undeclared
    assert "transformers" in tokenizer and "transformers" in lbeval_side  # eval/prepare/tokenizers.py
    assert {"httpx2", "httpcore2", "openai"} <= runtime and "httpx" not in runtime
    server_side = (
        third_party_imports("eval/serve/faults")
        | third_party_imports("eval/serve/model.py")
        | third_party_imports("eval/serve/model_hybrid.py")
        | third_party_imports("eval/serve/model_draft.py")
    )
    assert server_side <= SERVER_SIDE

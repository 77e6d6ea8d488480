"""The example launch specs of docs/servers/gpu-ab.md parse with lbeval's own loader and say what the page says:
separate devices (CUDA_VISIBLE_DEVICES 0 and 1, the parent's env merged into the child's), one shared device
(the same device, --gpu-memory-utilization 0.45 on both sides), port auto and distinct builds where stated."""

from __future__ import annotations

import re
from pathlib import Path

from eval.serve.launch_specs import LaunchSpec, load_launch_specs

DOC = Path(__file__).resolve().parents[3] / "docs" / "servers" / "gpu-ab.md"
BLOCK_RE = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def doc_specs(tmp_path: Path) -> list[dict[str, LaunchSpec]]:
    blocks = BLOCK_RE.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 2, "the page has one toml block per set-up"
    out = []
    for i, text in enumerate(blocks):
        path = tmp_path / f"block{i}.toml"
        path.write_text(text, encoding="utf-8")
        out.append(load_launch_specs([path], environ={}, shipped=False))
    return out


def flag(spec: LaunchSpec, name: str) -> str | None:
    args = list(spec.args)
    return args[args.index(name) + 1] if name in args else None


def test_separate_devices(tmp_path: Path) -> None:
    specs = doc_specs(tmp_path)[0]
    assert sorted(specs) == ["main", "main-gpu1", "patched"]
    main, patched, aa = specs["main"], specs["patched"], specs["main-gpu1"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in (main, patched, aa)] == ["0", "1", "1"]
    assert patched.env["VLLM_SERVER_DEV_MODE"] == "1"  # inherited through extends
    assert patched.command[0] != main.command[0] and aa.command == main.command  # other build; same build
    for s in (main, patched, aa):
        assert s.managed and s.port is None and "{port}" in s.log
        assert s.args == main.args and "--enable-prompt-tokens-details" in s.args
        assert flag(s, "--gpu-memory-utilization") is None  # a whole device each: vLLM's default


def test_one_shared_device_at_half_memory(tmp_path: Path) -> None:
    specs = doc_specs(tmp_path)[1]
    assert sorted(specs) == ["main-shared", "patched-shared"]
    sides = [specs["main-shared"], specs["patched-shared"]]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in sides] == ["0", "0"]
    assert [flag(s, "--gpu-memory-utilization") for s in sides] == ["0.45", "0.45"]
    assert sum(float(flag(s, "--gpu-memory-utilization") or 1) for s in sides) <= 0.9
    assert sides[0].command[0] != sides[1].command[0]
    assert all(s.managed and s.port is None for s in sides)


def test_the_commands_on_the_page_name_specs_it_defines(tmp_path: Path) -> None:
    defined = {n for specs in doc_specs(tmp_path) for n in specs}
    used = set(re.findall(r"^(?:\$ )?lbeval ab (\S+) (\S+)", DOC.read_text(encoding="utf-8"), re.M))
    assert len(used) >= 4 and all(a in defined and b in defined for a, b in used), used

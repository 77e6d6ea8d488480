"""A/A and A/B sessions of `lbeval ab` on fake servers whose prefill times carry seeded random noise, for the
A/A floor tests (tests/eval/analyze/test_aa_floor.py, tests/eval/gate/test_aa_gate.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from eval.records.ab_pairs import last_pairs, read_pairs
from eval.records.run_folder import RECORDS_NAME, scan_records
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

N_INPUTS, REPS = 6, 3


def inputs_file(tmp_path: Path, n: int = N_INPUTS) -> Path:
    path = tmp_path / f"inputs-{n}.jsonl"
    if not path.exists():
        write_rows(path, [make_row(i, words=60 + 20 * i) for i in range(n)])
    return path


def session(
    tmp_path: Path,
    base: str,
    variant: str,
    *,
    sigma: float,
    variant_factor: float = 1.0,
    noise_seed: int = 1,
    inputs: Path | None = None,
    passes: tuple[str, ...] = ("cold", "warm", "timing"),
) -> tuple[Path, Path]:
    """One `lbeval ab base variant` session on two fake servers. After every unit a side ran, that side's next
    prefill times are multiplied by exp(N(0, sigma)) (seeded), and the variant's by `variant_factor` too."""
    rng = np.random.default_rng(noise_seed)
    with FakeServer() as a, FakeServer() as b:
        servers = {"a": a, "b": b}
        factor = {"a": 1.0, "b": variant_factor}

        def noise(side: str, _unit: tuple[int, str, int]) -> None:
            servers[side].slowdown = factor[side] * math.exp(rng.normal(0.0, sigma))

        b.slowdown = variant_factor
        path = inputs if inputs is not None else inputs_file(tmp_path)
        ca = config_for(a, path, tmp_path / "runs", variant=base, passes=passes, timing_reps=REPS)
        return execute_ab(
            AbConfig(ca, replace(ca, variant=variant, topology=endpoints(b.base_url)), seed=5), between=noise
        )


def warm_prefill_pairs(da: Path, db: Path) -> tuple[list[str], list[float], list[float]]:
    """Warm prefill (s) of each adjacent timing pair, read straight from the records by the pair's seqs."""
    recs = {d: {r.seq: r for r in scan_records(d / RECORDS_NAME).records} for d in (da, db)}
    ids, a, b = [], [], []
    for p in last_pairs(read_pairs(da)).values():
        if p.kind != "timing" or not p.adjacent:
            continue
        ra = next(recs[da][s] for s in p.a.seqs if recs[da][s].pass_name == "timing_warm")
        rb = next(recs[db][s] for s in p.b.seqs if recs[db][s].pass_name == "timing_warm")
        ids.append(f"{p.dataset}/{p.example_id}")
        a.append((ra.server_metrics or {})["prefill_time_s"])
        b.append((rb.server_metrics or {})["prefill_time_s"])
    return ids, a, b


def cluster_bootstrap_ci(
    ids: list[str], a: list[float], b: list[float], seed: int, resamples: int
) -> tuple[float, float]:
    """The 95% percentile interval (%) of exp(mean log(b/a)) - 1, resampling inputs with replacement (all pairs of
    a drawn input), written from the definition: inputs numbered in order of first appearance, one
    rng.integers(0, n, (resamples, n)) draw, numpy.quantile on the log scale."""
    order = list(dict.fromkeys(ids))
    code = np.array([order.index(i) for i in ids])
    logs = np.log(np.array(b)) - np.log(np.array(a))
    n = len(order)
    sums = np.array([logs[code == k].sum() for k in range(n)])
    sizes = np.array([(code == k).sum() for k in range(n)], dtype=float)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return 100.0 * math.expm1(float(low)), 100.0 * math.expm1(float(high))

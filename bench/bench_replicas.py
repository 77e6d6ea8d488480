"""Replicas' scaling on fake servers of a fixed per-request latency (`python -m bench replicas`).

48 inputs in the cold, warm and repeat passes (144 requests) through the real runner (eval/run/replicas.py), at
N = 1, 2, 4 and 8 replicas, each a fake server (tests/support/fake_server.py, `--latency`) in its own process, each
replica at concurrency 1. A server answers each generation request after LATENCY_S, so a perfect harness takes
144 x LATENCY_S / N plus the probes; the line gives the wall time, the speed-up over N = 1 and whether it is
within 10% of N, and the client's CPU per request (this process's CPU time: the servers run elsewhere). The
records are checked too: every input's requests on one replica, every final record ok (each warm hit found).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import smoke
from bench.bench_gap import counting_scrapes
from eval.prepare.inputs import InputRow, InputsHeader, sha256_text, write_inputs
from eval.records.final import select_final
from eval.records.run_folder import load_run
from eval.run.config import RunConfig
from eval.run.runner import execute_run

INPUTS = 48
PASSES = ("cold", "warm", "repeat")
LATENCY_S = 0.2
REPLICAS = (1, 2, 4, 8)
WORDS = 200


@dataclass(frozen=True)
class Scaling:
    replicas: int
    requests: int
    wall_s: float  # the whole `lbeval run`: probes, plan, manifest, the units
    span_s: float  # the units only: the first request sent to the last answered (the records' client timings)
    cpu_ms_per_request: float
    scrapes_per_request: float  # GET /metrics by the client (the probes' included)


def _rows(inputs: int) -> list[InputRow]:
    rows = []
    for i in range(inputs):
        words = WORDS + 7 * (i % 5)  # unequal prompts: the assignment balances them
        prompt = f"Example ex{i}: " + " ".join(f"ex{i}w{j}" for j in range(words)) + "\n\nAnswer:"
        rows.append(
            InputRow(
                dataset="qasper",
                id=f"ex{i}",
                prompt=prompt,
                mode="chat",
                max_tokens=6,
                prompt_sha256=sha256_text(prompt),
                prompt_tokens=words + 4,
                truncated=False,
                answers=[f"answer {i}"],
                all_classes=None,
                length=words,
            )  # fmt: skip
        )
    return rows


def _header() -> InputsHeader:
    return InputsHeader(
        source={"kind": "bench"}, seed=1, n=None, datasets=["qasper"], selected_ids={}, templates={},
        tokenizer={"kind": "none"}, max_input_tokens=None, max_tokens={"qasper": 6}, lbeval_version="bench",
        git_commit=None, git_dirty=None,
    )  # fmt: skip


@contextmanager
def _fake_servers(n: int) -> Iterator[list[str]]:
    """n fake servers, each its own process; their URLs."""
    with ExitStack() as stack:
        urls = []
        for _ in range(n):
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.fake_server", "--latency", str(LATENCY_S)],
                stdout=subprocess.PIPE, text=True, start_new_session=True,
            )  # fmt: skip
            stack.callback(proc.wait, 10)
            stack.callback(os.killpg, proc.pid, 15)
            assert proc.stdout is not None
            urls.append(proc.stdout.readline().strip())
        yield urls


def measure(n: int, work: Path, n_inputs: int = INPUTS) -> Scaling:
    inputs = work / "inputs.jsonl"
    if not inputs.exists():
        write_inputs(inputs, _header(), _rows(n_inputs))
    with _fake_servers(n) as urls:
        config = RunConfig(
            variant=f"x{n}", inputs=inputs, base_url=urls[0], base_urls=tuple(urls) if n > 1 else (),
            out=work / "runs", passes=PASSES, quiet=True,
        )  # fmt: skip
        with counting_scrapes() as scrapes:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            run_dir = execute_run(config)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    loaded = load_run(run_dir)
    finals = select_final(loaded.records).final
    if not loaded.manifest.complete or any(r.status != "ok" for r in finals.values()):
        raise SystemExit(f"bench replicas: N={n}: the run is not complete and ok")
    per_input: dict[str, set[int]] = {}
    for r in loaded.records:
        per_input.setdefault(r.example_id, set()).add(r.replica)
    if any(len(s) != 1 for s in per_input.values()):
        raise SystemExit(f"bench replicas: N={n}: an input's requests went to more than one replica")
    timed = [
        (r.timings.sent_at, r.timings.sent_at + (r.timings.done_s or 0.0))
        for r in loaded.records
        if r.timings
    ]
    span = max(end for _, end in timed) - min(start for start, _ in timed)
    n_rec = len(loaded.records)
    return Scaling(n, n_rec, wall, span, cpu * 1000 / n_rec, scrapes[0] / n_rec)


def main() -> None:
    replicas, inputs = ((1, 2), 4) if smoke() else (REPLICAS, INPUTS)
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(n, Path(tmp), inputs) for n in replicas]
    base, base_span = results[0].wall_s, results[0].span_s
    print(f"{inputs} inputs x {'/'.join(PASSES)}, fake latency {LATENCY_S * 1000:.0f} ms, concurrency 1 each")
    print(
        "| replicas | requests | wall s | speed-up | units s | units speed-up | within 10% of N "
        "(wall / units) | client CPU ms/request | /metrics scrapes/request |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: |")
    for r in results:
        speedup, units = base / r.wall_s, base_span / r.span_s
        ok = "/".join("yes" if s >= 0.9 * r.replicas else "no" for s in (speedup, units))
        print(
            f"| {r.replicas} | {r.requests} | {r.wall_s:.2f} | {speedup:.2f} | {r.span_s:.2f} | {units:.2f} | "
            f"{ok} | {r.cpu_ms_per_request:.2f} | {r.scrapes_per_request:.2f} |"
        )
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

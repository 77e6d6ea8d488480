"""Replicas' scaling on fake servers of a fixed per-request latency (`python -m bench replicas`).

12 and 48 inputs through the real runner (eval/run/replicas.py) with the default plan of `lbeval run` (the cache
passes with the controls, timing x2, and the default plan's scenarios: one scenario input per 12 inputs, and on
2+ replicas the replicas scenario), on N = 1 and 4 replicas, each a fake server (tests/support/fake_server.py,
`--latency`) in its own process at concurrency 1. A server answers each generation request after LATENCY_S.
The line gives the wall time of the whole `lbeval run` (Clients, probes, plan, manifest, units), the units' span
(first request sent to last answered, from the records), the speed-up of each over N = 1, and the client's CPU
per request (this process's CPU time: the servers run elsewhere). N > 1 plans more requests than N = 1 (the
replicas scenario); the speed-up is of the whole run as a user sees it. The records are checked too: every
final record ok, every unit's group on one replica (an input's main unit, each timing repetition's cold and warm,
each scenario unit), every input's main unit on the replica it was assigned.
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
from eval.prepare.inputs import (
    InputRow,
    InputsHeader,
    InputsSource,
    InputsTemplates,
    InputsTokenizer,
    sha256_text,
    write_inputs,
)
from eval.records.final import select_final, unit_of
from eval.records.run_folder import load_run
from eval.records.scenarios import DEFAULT_PLAN
from eval.records.types import RequestRecord
from eval.records.vocabulary import UNIT_MAIN
from eval.run.config import RunConfig, endpoints
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings

INPUTS = (12, 48)
PASSES = ("cold", "warm", "repeat", "controls", "timing")
TIMING_REPS = 2
LATENCY_S = 0.1
REPLICAS = (1, 4)
WORDS = 200
TARGETS = {12: 3.2, 48: 3.6}  # the wall speed-up at 4 replicas each input count must reach


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
        source=InputsSource(kind="bench"), seed=1, n=None, datasets=["qasper"], selected_ids={},
        templates=InputsTemplates(), tokenizer=InputsTokenizer(kind="none"), max_input_tokens=None,
        max_tokens={"qasper": 6}, lbeval_version="bench", git_commit=None, git_dirty=None,
    )  # fmt: skip


@contextmanager
def _fake_servers(n: int) -> Iterator[list[str]]:
    """n fake servers, each its own process, all started at once; their URLs (each prints its URL once it
    listens)."""
    with ExitStack() as stack:
        procs = []
        for _ in range(n):
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.fake_server", "--latency", str(LATENCY_S)],
                stdout=subprocess.PIPE, text=True, start_new_session=True,
            )  # fmt: skip
            stack.callback(proc.wait, 10)
            stack.callback(os.killpg, proc.pid, 15)
            procs.append(proc)
        urls = []
        for proc in procs:
            assert proc.stdout is not None
            urls.append(proc.stdout.readline().strip())
        yield urls


def _plan() -> ScenarioSettings:
    """The default plan of `lbeval run` (eval/commands/run.scenario_config with no scenario option)."""
    p = DEFAULT_PLAN
    return ScenarioSettings(
        scenarios=p.scenarios, batch_sizes=p.batch_sizes, repeats=p.repeats, max_tokens=p.max_tokens,
        hit_classes=p.hit_classes, default_plan=True,
    )  # fmt: skip


def measure(n: int, work: Path, n_inputs: int) -> Scaling:
    inputs = work / f"inputs-{n_inputs}.jsonl"
    if not inputs.exists():
        write_inputs(inputs, _header(), _rows(n_inputs))
    with _fake_servers(n) as urls:
        config = RunConfig(
            variant=f"i{n_inputs}-x{n}", inputs=inputs, topology=endpoints(*urls),
            out=work / "runs", passes=PASSES, timing_reps=TIMING_REPS, scenarios=_plan(), quiet=True,
        )  # fmt: skip
        with counting_scrapes() as scrapes:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            run_dir = execute_run(config)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    loaded = load_run(run_dir)
    _check(n, loaded.manifest.complete, loaded.records)
    timed = [
        (r.timings.sent_at, r.timings.sent_at + (r.timings.done_s or 0.0))
        for r in loaded.records
        if r.timings
    ]
    span = max(end for _, end in timed) - min(start for start, _ in timed)
    n_rec = len(loaded.records)
    return Scaling(n, n_rec, wall, span, cpu * 1000 / n_rec, scrapes[0] / n_rec)


def _check(n: int, complete: bool, records: list[RequestRecord]) -> None:
    """Complete and ok; every unit's group on one replica (the replicas scenario visits each in turn), so each
    timing repetition's cold and warm share one; every input's main unit on one replica."""
    finals = select_final(records).final
    if not complete or any(r.status != "ok" for r in finals.values()):
        raise SystemExit(f"bench replicas: N={n}: the run is not complete and ok")
    groups: dict[object, set[int]] = {}
    for r in records:
        if r.scenario != "replicas":
            groups.setdefault((unit_of(r), r.group), set()).add(r.replica)
        if unit_of(r).kind == UNIT_MAIN:
            groups.setdefault((r.dataset, r.example_id), set()).add(r.replica)
    if any(len(s) != 1 for s in groups.values()):
        raise SystemExit(f"bench replicas: N={n}: a unit's or an input's main requests went to two replicas")


def main() -> None:
    cases = ((4,), (1, 2)) if smoke() else (INPUTS, REPLICAS)
    print(
        f"default plan ({'/'.join(PASSES)}, timing x{TIMING_REPS}), fake latency {LATENCY_S * 1000:.0f} ms, "
        "concurrency 1 each"
    )
    print(f"load average at the start (1, 5, 15 min): {_load()}")
    print(
        "| inputs | replicas | requests | wall s | speed-up | units s | units speed-up | target | "
        "client CPU ms/request | /metrics scrapes/request |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: |")
    for n_inputs in cases[0]:
        with tempfile.TemporaryDirectory() as tmp:
            results = [measure(n, Path(tmp), n_inputs) for n in cases[1]]
        base, base_span = results[0].wall_s, results[0].span_s
        for r in results:
            speedup, units = base / r.wall_s, base_span / r.span_s
            target = TARGETS.get(n_inputs) if r.replicas == 4 else None
            met = "" if target is None else f">= {target}: {'yes' if speedup >= target else 'no'}"
            print(
                f"| {n_inputs} | {r.replicas} | {r.requests} | {r.wall_s:.2f} | {speedup:.2f} | {r.span_s:.2f} | "
                f"{units:.2f} | {met} | {r.cpu_ms_per_request:.2f} | {r.scrapes_per_request:.2f} |",
                flush=True,
            )
    print(f"load average at the end (1, 5, 15 min): {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()

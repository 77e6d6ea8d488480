"""Builds realistic run folders for the score/compare/report/gate tests, written through eval.records.

A run: an inputs manifest (qasper + gov_report rows by default) and, per input, cold/warm/repeat records
(each output = the text the test chose, tokenized word by word), R timing repetitions (timing_cold r and
timing_warm r) and the two controls. Faults and divergences are injected per (example, pass, repetition).

Token ids: word w -> 1000 + (crc32(w) % 50000). Top-k at each position: the chosen id with logprob
`-0.05 + shift` (shift 0 unless injected; `position_shifts` adds a shift at single positions), then chosen+1 at `-0.05 - margin` and chosen+2 at -6.0, so the
top-1/top-2 margin is `margin` (default 3.0).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.prepare.inputs import InputRow, inputs_digest, sha256_text, write_inputs
from eval.records.manifest_parts import ClientVersions, HostFacts, InputsHeaderFacts, ProbeFacts, RunSettings
from eval.records.run_folder import RECORDS_NAME, RecordWriter, RunManifest, write_manifest
from eval.records.types import ClientTimings, RequestRecord, TopK, Usage
from tests.eval.headers import inputs_header

BLOCK = 16
SETTINGS: dict[str, Any] = {
    "temperature": 0.0,
    "top_p": 1.0,
    "seed": 1234,
    "top_logprobs": 3,
    "passes": ["cold", "warm", "repeat", "timing", "controls"],
    "timing_reps": 2,
    "cold_mode": "salt",
    "concurrency": 1,
    "max_tokens_override": None,
    "return_tokens_as_token_ids": True,
    "chat_template_kwargs": {"enable_thinking": False},
}

QASPER_ANSWERS = [["yes"], ["the BLEU score"], ["12 languages"], ["unanswerable"]]
GOV_ANSWERS = [
    ["The agency reviewed the program and found that costs rose. It recommends better oversight."],
    ["GAO found that the department lacks a plan. Officials agreed to develop one."],
]


def token_id(word: str) -> int:
    return 1000 + zlib.crc32(word.encode("utf-8")) % 50000


def tokens_of(text: str) -> list[int]:
    return [token_id(w) for w in text.split(" ") if w != ""] if text else []


def make_rows(n_qasper: int = 4, n_gov: int = 2) -> list[InputRow]:
    rows = []
    for ds, n, answers in (("qasper", n_qasper, QASPER_ANSWERS), ("gov_report", n_gov, GOV_ANSWERS)):
        for i in range(n):
            prompt = f"{ds} prompt {i} " + "context " * (40 + 7 * i)
            rows.append(
                InputRow(
                    dataset=ds,
                    id=f"{ds[:3]}{i:02d}",
                    prompt=prompt,
                    mode="chat",
                    max_tokens=128,
                    prompt_sha256=sha256_text(prompt),
                    prompt_tokens=50 + 7 * i,
                    truncated=False,
                    answers=answers[i % len(answers)],
                    all_classes=None,
                    length=1000 + i,
                )
            )
    return rows


def write_inputs_file(path: Path, rows: list[InputRow]) -> str:
    write_inputs(path, inputs_header(datasets=sorted({r.dataset for r in rows})), rows)
    return inputs_digest(path)


Slot = tuple[str, str, int]  # (example id, pass, repetition)


@dataclass
class RunSpec:
    """What to write; tests set the injection dicts (keys: example id, pass, repetition)."""

    variant: str
    rows: list[InputRow]
    inputs_path: Path
    reps: int = 2
    settings: dict[str, Any] = field(default_factory=dict)
    model: str = "test-model"
    texts: dict[Slot, str] = field(default_factory=dict)  # output text overrides (default: the answer)
    margins: dict[Slot, float] = field(default_factory=dict)  # top-1/top-2 margin overrides
    shifts: dict[Slot, float] = field(default_factory=dict)  # logprob shift of the chosen token
    # shift of the chosen token's logprob at single positions: slot -> {position: shift}
    position_shifts: dict[Slot, dict[int, float]] = field(default_factory=dict)
    errors: set[Slot] = field(default_factory=set)  # final status error
    invalid: dict[Slot, bool] = field(default_factory=dict)  # warm miss; value: recovered by the retry
    missing: set[Slot] = field(default_factory=set)  # no record at all
    prefill_s: dict[str, float] = field(default_factory=lambda: {"timing_cold": 0.200, "timing_warm": 0.050})
    prefill_step_s: float = 0.010  # per-input increment, so inputs differ
    metrics: bool = True  # server_metrics present
    complete: bool = True
    started_at: str = "2026-09-09T10:00:00Z"
    ended_at: str | None = "2026-09-09T10:20:00Z"
    run_id: str = "20260909T100000Z-test"


def salt_of(example_id: str, pass_name: str, rep: int) -> str:
    """The salts the runner sends: one per main unit (cold, then warm, repeat and the sibling on its salt),
    a new one for the salt control, one per timing repetition (timing_cold, then timing_warm on its salt)."""
    if pass_name.startswith("timing"):
        return f"salt-{example_id}-timing-{rep}"
    return f"salt-{example_id}-{'control' if pass_name == 'control_salt' else 'main'}"


def default_text(row: InputRow) -> str:
    return row.answers[0]


def _topk(tokens: list[int], margin: float, shift: float, at: dict[int, float] | None = None) -> TopK:
    at = at or {}
    ids = [[t, t + 1, t + 2] for t in tokens]
    chosen = [(-0.05 + shift + at[p]) if p in at else (-0.05 + shift) for p in range(len(tokens))]
    lps = [[lp, -0.05 - margin, -6.0] for lp in chosen]
    return TopK(ids=ids, logprobs=lps, chosen_logprobs=[row[0] for row in lps])


class _Writer:
    def __init__(self, spec: RunSpec, writer: RecordWriter) -> None:
        self.spec, self.writer, self.seq = spec, writer, 0

    def record(
        self, row: InputRow, pass_name: str, rep: int, i: int, attempt: int = 0, status: str = "ok"
    ) -> None:
        s = self.spec
        slot = (row.id, pass_name, rep)
        timing = pass_name.startswith("timing")
        text = s.texts.get(slot, default_text(row))
        tokens = tokens_of(text)
        if timing:
            text, tokens = text.split(" ")[0], tokens[:1]
        cold_like = pass_name in ("cold", "timing_cold", "control_salt")
        expected = 0 if cold_like else (row.prompt_tokens - 1) // BLOCK * BLOCK  # type: ignore[operator]
        cached = 0 if cold_like or status == "invalid" else expected
        error = None
        if slot in s.errors:
            status, error = "error", "HTTP 503 after 3 retries"
        elif status == "invalid":
            error = f"cached_tokens 0, expected {expected}"
        ok = status != "error"
        prefill = s.prefill_s.get(pass_name, 0.1) + s.prefill_step_s * i + 0.001 * rep
        self.writer.write(
            RequestRecord(
                run_id=s.run_id,
                variant=s.variant,
                dataset=row.dataset,
                example_id=row.id,
                pass_name=pass_name,
                repetition=rep,
                attempt=attempt,
                seq=self.seq,
                group=0,
                endpoint="chat",
                settings={"temperature": 0.0, "max_tokens": 1 if timing else row.max_tokens},
                cache_salt=salt_of(row.id, pass_name, rep),
                prompt_sha256=row.prompt_sha256,
                status=status,
                error=error,
                output_text=text if ok else None,
                finish_reason="stop" if ok else None,
                output_token_ids=tokens if ok else None,
                topk=_topk(
                    tokens, s.margins.get(slot, 3.0), s.shifts.get(slot, 0.0), s.position_shifts.get(slot)
                )
                if ok
                else None,
                usage=Usage(row.prompt_tokens, len(tokens), cached) if ok else Usage(),
                expected_cached_tokens=expected,
                timings=ClientTimings(1.0e9 + self.seq, prefill + 0.004, prefill + 0.02) if ok else None,
                server_metrics={"prefill_time_s": prefill, "queue_time_s": 0.0001}
                if ok and s.metrics
                else None,
            )
        )
        self.seq += 1

    def slot(self, row: InputRow, pass_name: str, rep: int, i: int) -> None:
        s = self.spec
        slot = (row.id, pass_name, rep)
        if slot in s.missing:
            return
        if slot in s.invalid:
            self.record(row, pass_name, rep, i, attempt=0, status="invalid")
            if s.invalid[slot]:
                self.record(row, pass_name, rep, i, attempt=1)
            else:
                self.record(row, pass_name, rep, i, attempt=1, status="invalid")
            return
        self.record(row, pass_name, rep, i)


def write_run(root: Path, spec: RunSpec) -> Path:
    """Write runs/<variant>/<run_id>/ under root; returns the run folder."""
    run_dir = root / spec.variant / spec.run_id
    settings = {**SETTINGS, "timing_reps": spec.reps, **spec.settings}
    expected = 0
    with RecordWriter(run_dir / RECORDS_NAME) as writer:
        w = _Writer(spec, writer)
        for i, row in enumerate(spec.rows):
            generation = [p for p in settings["passes"] if p in ("cold", "warm", "repeat")]
            for p in generation:
                w.slot(row, p, 0, i)
            controls = ["control_salt", "control_sibling"] if "controls" in settings["passes"] else []
            for p in controls:
                w.slot(row, p, 0, i)
            reps = spec.reps if "timing" in settings["passes"] else 0
            for rep in range(reps):
                w.slot(row, "timing_cold", rep, i)
                w.slot(row, "timing_warm", rep, i)
            expected += len(generation) + len(controls) + 2 * reps
    manifest = RunManifest(
        schema_version=1,
        run_id=spec.run_id,
        variant=spec.variant,
        inputs_path=str(spec.inputs_path),
        inputs_sha256=inputs_digest(spec.inputs_path),
        inputs_header=InputsHeaderFacts.from_dict({"seed": 1}),
        model=spec.model,
        probe=ProbeFacts(block_size=BLOCK),
        settings=RunSettings.from_dict(settings),
        lbeval_version="0.1.0",
        git_commit=None,
        git_dirty=None,
        client_versions=ClientVersions(),
        host=HostFacts.from_dict({"hostname": "test"}),
        started_at=spec.started_at,
        ended_at=spec.ended_at if spec.complete else None,
        complete=spec.complete,
        warnings=[],
        expected_records=expected,
    )
    write_manifest(run_dir, manifest)
    return run_dir


def base_and_variant(tmp_path: Path, **variant_kw: Any) -> tuple[RunSpec, RunSpec]:
    """Two clean runs on the same inputs: base 'main' and variant 'patched' (20% faster warm prefill)."""
    rows = make_rows()
    inputs = tmp_path / "inputs.jsonl"
    write_inputs_file(inputs, rows)
    base = RunSpec("main", rows, inputs)
    variant = RunSpec(
        "patched",
        rows,
        inputs,
        prefill_s={"timing_cold": 0.200, "timing_warm": 0.040},
        prefill_step_s=0.008,
        started_at="2026-09-09T10:30:00Z",
        ended_at="2026-09-09T10:50:00Z",
        run_id="20260909T103000Z-test",
    )
    for k, v in variant_kw.items():
        setattr(variant, k, v)
    return base, variant

"""Hand-made LongBench v2 runs (records written through eval.records) for the scoring, compare and gate tests.

Rows are given as (id, difficulty, length, answer); a run as the output text of each (id, pass), where the pass
is cold/warm/repeat (the one call, or CoT's reasoning call) or cold_answer/warm_answer/repeat_answer (CoT), and
an output of ERROR / INVALID writes a record with that status, MISSING none at all. Outputs not given are
"The correct answer is (<answer>)" (and "reasoning" for a CoT reasoning call).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval.benchmarks.longbench_v2.inputs import V2InputFields
from eval.prepare.inputs import InputRow, inputs_digest, sha256_text, write_inputs
from eval.records.manifest_parts import ClientVersions, HostFacts, InputsHeaderFacts, ProbeFacts, RunSettings
from eval.records.run_folder import RECORDS_NAME, RecordWriter, RunManifest, write_manifest
from eval.records.types import RequestRecord, TopK, Usage
from eval.records.vocabulary import ANSWER_PASSES
from tests.eval.headers import inputs_header

ERROR, INVALID, MISSING = "<error>", "<invalid>", "<missing>"
BLOCK = 16
PROMPT_TOKENS = 100
TEMPLATE = "Question? Choices: (A) a (B) b (C) c (D) d Let’s think step by step: $COT$ Based on the above?"


def v2_row(item_id: str, difficulty: str, length: str, answer: str, *, cot: bool = False) -> InputRow:
    prompt = f"Please read the following text. <text> document of {item_id} </text> What is the answer?"
    return InputRow(
        dataset="longbench_v2", id=item_id, prompt=prompt, mode="chat", max_tokens=1024 if cot else 128,
        prompt_sha256=sha256_text(prompt), prompt_tokens=PROMPT_TOKENS, truncated=False, answers=[answer],
        all_classes=None, length=4000, answer_template=TEMPLATE if cot else None,
        answer_max_tokens=128 if cot else None,
        extras=V2InputFields("cot" if cot else "0shot", difficulty, length, original_tokens=PROMPT_TOKENS),
    )  # fmt: skip


def write_v2_inputs(path: Path, rows: Sequence[InputRow]) -> Path:
    header = inputs_header(datasets=["longbench_v2"], max_tokens={"longbench_v2": rows[0].max_tokens})
    write_inputs(path, header, list(rows))
    return path


@dataclass
class V2Run:
    variant: str
    rows: list[InputRow]
    inputs_path: Path
    outputs: dict[tuple[str, str], str] = field(default_factory=dict)
    passes: tuple[str, ...] = ("cold", "warm", "repeat")
    run_id: str = "20260909T100000Z-v2"
    started_at: str = "2026-09-09T10:00:00Z"
    ended_at: str = "2026-09-09T10:10:00Z"


def _ids(text: str) -> list[int]:
    return [1000 + zlib.crc32(w.encode()) % 50000 for w in text.split(" ") if w]


def write_v2_run(root: Path, spec: V2Run) -> Path:
    run_dir = root / spec.variant / spec.run_id
    expected, seq = 0, 0
    with RecordWriter(run_dir / RECORDS_NAME) as writer:
        for row in spec.rows:
            cot = row.answer_template is not None
            steps = [*spec.passes, *([ANSWER_PASSES[p] for p in spec.passes] if cot else [])]
            for pass_name in steps:
                expected += 1
                answer_call = pass_name.endswith("_answer")
                default = (
                    "reasoning" if cot and not answer_call else f"The correct answer is ({row.answers[0]})"
                )
                text = spec.outputs.get((row.id, pass_name), default)
                if text == MISSING:
                    continue
                status = {ERROR: "error", INVALID: "invalid"}.get(text, "ok")
                cold = pass_name in ("cold", "cold_answer")
                cached = 0 if cold or status == "invalid" else (PROMPT_TOKENS - 1) // BLOCK * BLOCK
                ok = status != "error"
                out = text if status == "ok" else ("The correct answer is (A)" if ok else None)
                tokens = _ids(out) if out else []
                writer.write(
                    RequestRecord(
                        run_id=spec.run_id,
                        variant=spec.variant,
                        dataset=row.dataset,
                        example_id=row.id,
                        pass_name=pass_name,
                        repetition=0,
                        attempt=0,
                        seq=seq,
                        group=0,
                        endpoint="chat",
                        settings={"temperature": 0.0, "max_tokens": 128},
                        cache_salt=f"s-{row.id}-{cold}",
                        prompt_sha256=row.prompt_sha256,
                        status=status,
                        error=None if status == "ok" else f"injected {status}",
                        output_text=out,
                        finish_reason="stop" if ok else None,
                        output_token_ids=tokens if ok else None,
                        topk=TopK([[t] for t in tokens], [[-0.1] for _ in tokens], [-0.1 for _ in tokens])
                        if ok
                        else None,
                        usage=Usage(PROMPT_TOKENS, len(tokens), cached) if ok else Usage(),
                        expected_cached_tokens=0 if cold else (PROMPT_TOKENS - 1) // BLOCK * BLOCK,
                        variation={"call": "answer", "reasoning": pass_name[: -len("_answer")]}
                        if answer_call
                        else {},
                    )  # fmt: skip
                )
                seq += 1
    settings = {
        "temperature": 0.0, "top_p": 1.0, "seed": 1234, "top_logprobs": 1, "passes": list(spec.passes),
        "timing_reps": 0, "cold_mode": "salt", "concurrency": 1, "max_tokens_override": None,
        "return_tokens_as_token_ids": True, "chat_template_kwargs": {"enable_thinking": False},
    }  # fmt: skip
    manifest = RunManifest(
        schema_version=2, run_id=spec.run_id, variant=spec.variant, inputs_path=str(spec.inputs_path),
        inputs_sha256=inputs_digest(spec.inputs_path), inputs_header=InputsHeaderFacts.from_dict({"seed": 1}), model="test-model",
        probe=ProbeFacts(block_size=BLOCK), settings=RunSettings.from_dict(settings), lbeval_version="0.1.0", git_commit=None,
        git_dirty=None, client_versions=ClientVersions(), host=HostFacts.from_dict({"hostname": "test"}), started_at=spec.started_at,
        ended_at=spec.ended_at, complete=True, warnings=[], expected_records=expected,
    )  # fmt: skip
    write_manifest(run_dir, manifest)
    return run_dir

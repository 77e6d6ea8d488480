"""One run's records -> its scores, offline (no server): numbers only (eval/report renders them).

What is computed (all from `runs/<variant>/<run_id>/`, plus the inputs manifest the run names):
    accuracy   official LongBench score per dataset and generation pass (cold, warm, repeat), with the
               secondary ROUGE-L column (Google's rouge-score) for English rouge datasets
    agreement  within the variant: cold/warm and warm/repeat pairs (text, token and first-token
               equality, first divergence with near-tie margins, top-k logprob delta and overlap) and
               the timing passes' first tokens (timing_cold r vs timing_warm r), unique outputs per prompt
    timing     per input: warm and cold prefill (server, ms) and TTFT (client, ms) over the repetitions
    cache      per pass: how many requests met their cache expectation; the salt and sibling controls
    attribution  one row per cause (prefix cache, batch composition, hit length, repeats, traffic) from the
               scenario that isolates it, with confounding stated (eval/analyze/attribution.py)

Which record counts is `eval.records.final.select_final`. A sample is scored only when its final record has
status "ok"; "invalid" and "error" samples and missing records are counted in every denominator (k/N where N is
every input), never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval.analyze.accuracy import accuracy, example_scores
from eval.analyze.accuracy_types import DatasetAccuracy, ExampleScore
from eval.analyze.agreement import Pair, PairStats, UniqueOutputs, collect_pairs, pair_stats, unique_outputs
from eval.analyze.attribution import Attribution, attribution
from eval.analyze.cache import CacheCheck, InvalidCounts, cache_check, invalid_counts
from eval.analyze.memo import ScoreMemo
from eval.analyze.spec_decode import SpecDecode, spec_decode
from eval.analyze.timing import Timing, timing
from eval.analyze.verification import CacheVerification, cache_verification
from eval.errors import DataError
from eval.prepare.inputs import InputRow, inputs_digest, read_inputs
from eval.records.ab_pairs import pairing_damage
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, select_final
from eval.records.manifest_parts import RunSettings
from eval.records.plan import completeness
from eval.records.run_folder import LoadedRun, RunManifest, damage, load_run
from eval.records.types import RequestRecord
from eval.records.vocabulary import GENERATION_PASSES, PASS_CHOICES, REASONING_OF, RECORD_PASSES
from eval.run.adaptive import read_adaptive

SCORES_SCHEMA_VERSION = 1


def passes_in_run(manifest: RunManifest, records: Sequence[RequestRecord]) -> list[str]:
    """The record passes of a run: those its settings asked for, plus any seen in its records."""
    names = set(manifest.settings.passes or ())
    for choice, produced in PASS_CHOICES.items():
        if choice in names:
            names.update(produced)
    if manifest.settings.timing_reps > 0:
        names.update(PASS_CHOICES["timing"])
    names.update(r.pass_name for r in records)
    return [p for p in RECORD_PASSES if p in names]


# ---------------------------------------------------------------- the whole run


@dataclass(frozen=True)
class RunInfo:
    variant: str
    run_id: str
    run_dir: str
    model: str
    inputs_path: str
    inputs_sha256: str
    complete: bool
    started_at: str | None
    ended_at: str | None
    expected_records: int
    n_records: int  # every record line read (retries and superseded groups included)
    n_slots: int  # planned (example, pass, repetition) slots holding a final record (eval/records/plan.py)
    torn_lines: int
    superseded_records: int
    passes: list[str]
    settings: RunSettings  # the manifest's, written in scores.json as the manifest holds them (to_dict)
    warnings: list[str]
    # what is wrong with the records as read (run_folder.damage): unreadable lines, duplicates, lost records
    damage: list[str] = field(default_factory=list)
    torn_line_numbers: list[int] = field(default_factory=list)
    duplicate_records: int = 0


@dataclass(frozen=True)
class RunScores:
    run: RunInfo
    n_inputs: int
    datasets: list[str]
    accuracy: list[DatasetAccuracy]
    agreement: dict[str, PairStats | None]  # cold_warm, warm_repeat, timing_first_token
    unique: UniqueOutputs
    timing: Timing
    cache: list[CacheCheck]
    errors: int  # final records with status error, all passes
    invalid: InvalidCounts
    schema_version: int = SCORES_SCHEMA_VERSION
    # one row per cause of a difference, from the scenario that isolates it (eval/analyze/attribution.py)
    attribution: Attribution | None = None
    # the server, how cold was made, and whether its cached-token count verified the cache state
    cache_verification: CacheVerification | None = None
    # speculative decoding's drafts and acceptance (None: no record has speculative figures)
    spec_decode: SpecDecode | None = None


@dataclass(frozen=True)
class ScoredRun:
    """Scores plus what compare needs from the raw data (pairs, example scores, inputs)."""

    loaded: LoadedRun
    rows: list[InputRow]
    selection: Selection
    example_scores: dict[str, dict[Key, ExampleScore]]  # pass -> key -> scores
    pairs: dict[str, list[Pair]]  # cold_warm, warm_repeat, timing_first_token
    scores: RunScores

    @property
    def keys(self) -> list[Key]:
        return [r.key for r in self.rows]


PAIR_KINDS = {  # name -> (pass a, pass b, repetitions are the timing reps)
    "cold_warm": ("cold", "warm", False),
    "warm_repeat": ("warm", "repeat", False),
    "timing_first_token": ("timing_cold", "timing_warm", True),
    # LongBench v2 CoT: the answer calls (each prompt built from its own pass's reasoning; README)
    "cold_warm_answer": ("cold_answer", "warm_answer", False),
    "warm_repeat_answer": ("warm_answer", "repeat_answer", False),
}


def resolve_inputs(manifest: RunManifest, run_dir: Path, override: Path | None = None) -> Path:
    """The inputs manifest a run names (as given, else relative to the run folder's ancestors)."""
    if override is not None:
        candidates = [override]
    else:
        given = Path(manifest.inputs_path)
        candidates = [given] if given.is_absolute() else [given, *(p / given for p in run_dir.parents)]
    for path in candidates:
        if path.is_file():
            return path
    raise DataError(
        run_dir,
        None,
        "inputs_path",
        f"the run's inputs manifest {manifest.inputs_path} was not found "
        "(scoring needs its answers; pass --inputs FILE if it moved)",
    )


def load_inputs(manifest: RunManifest, run_dir: Path, override: Path | None = None) -> list[InputRow]:
    path = resolve_inputs(manifest, run_dir, override)
    digest = inputs_digest(path)
    if digest != manifest.inputs_sha256:
        raise DataError(
            path,
            None,
            "sha256",
            f"inputs manifest has sha256 {digest[:12]}…, but run {manifest.run_id} "
            f"was made from {manifest.inputs_sha256[:12]}…; refusing to score against different inputs",
        )
    return read_inputs(path)[1]


def score_loaded(loaded: LoadedRun, rows: list[InputRow], memo: ScoreMemo | None = None) -> ScoredRun:
    """The run's scores; `memo`: the per-record results kept between scorings of a growing run (the stop
    check: eval/analyze/memo.py), the same scores as without."""
    m = loaded.manifest
    sel = select_final(loaded.records)
    keys = [r.key for r in rows]
    passes = passes_in_run(m, loaded.records)
    cot_keys = [r.key for r in rows if r.answer_template is not None]
    if cot_keys:  # CoT inputs: the answer call of every generation pass asked (also before any record of it)
        passes = [p for p in RECORD_PASSES if p in passes or REASONING_OF.get(p) in passes]
    reps = m.settings.timing_reps
    ex_scores = {p: example_scores(rows, sel, p, memo) for p in GENERATION_PASSES if p in passes}
    pairs: dict[str, list[Pair]] = {}
    agreement: dict[str, PairStats | None] = {}
    for name, (pa, pb, timed) in PAIR_KINDS.items():
        if pa not in passes or pb not in passes:
            agreement[name] = None
            continue
        found, counts = collect_pairs(
            cot_keys if pa in REASONING_OF else keys, sel, pa, pb, reps if timed else 1, memo=memo
        )
        pairs[name] = found
        agreement[name] = pair_stats(pa, pb, found, counts)
    cache = [
        cache_check(cot_keys if p in REASONING_OF else keys, sel, p, reps if p.startswith("timing") else 1)
        for p in passes
    ]
    finals = list(sel.final.values())
    scores = RunScores(
        run=run_info(loaded, passes, sel, keys, cot_keys),
        n_inputs=len(rows),
        datasets=list(dict.fromkeys(r.dataset for r in rows)),
        accuracy=accuracy(rows, ex_scores),
        agreement=agreement,
        unique=unique_outputs(keys, sel),
        timing=timing(keys, sel, m.settings),
        cache=cache,
        errors=sum(r.status == "error" for r in finals),
        invalid=invalid_counts(sel),
        attribution=attribution(keys, sel, m.settings, agreement, memo),
        cache_verification=cache_verification(m, sel),
        spec_decode=spec_decode(finals),
    )
    return ScoredRun(loaded, rows, sel, ex_scores, pairs, scores)


def run_info(
    loaded: LoadedRun, passes: list[str], sel: Selection, keys: Sequence[Key], cot_keys: Sequence[Key]
) -> RunInfo:
    """The run as read. Complete: the manifest says so, every planned slot has a final record and none is
    outside the plan (eval/records/plan.completeness), no damage."""
    m = loaded.manifest
    adaptive = read_adaptive(loaded.run_dir)  # an ab session's added timing repetitions are in its plan
    reps_done = adaptive.reps_done if adaptive is not None else 0
    filled = completeness(m.settings, m.expected_records, keys, cot_keys, sel, reps_done)
    damaged = damage(loaded, sel)  # lost or unreadable records explain the plan's empty slots
    damaged += pairing_damage(m, loaded.run_dir)  # a side of an lbeval ab session: its pairing file checked
    damaged += filled.damage(bool(m.complete) and not damaged)
    complete = bool(m.complete) and filled.all_filled and not damaged
    warnings = list(m.warnings) + list(m.probe.warnings)
    warnings += [f"damaged: {d}" for d in damaged]
    if not complete:
        warnings.append("the run is incomplete (not every planned request has a readable record)")
    return RunInfo(
        variant=m.variant,
        run_id=m.run_id,
        run_dir=str(loaded.run_dir),
        model=m.model,
        inputs_path=m.inputs_path,
        inputs_sha256=m.inputs_sha256,
        complete=complete,
        started_at=m.started_at,
        ended_at=m.ended_at,
        expected_records=filled.plan_size,  # recomputed from the settings, not the manifest's figure alone
        n_records=len(loaded.records),
        n_slots=filled.filled,
        torn_lines=loaded.torn_lines,
        superseded_records=sel.superseded,
        passes=passes,
        settings=m.settings,
        warnings=list(dict.fromkeys(warnings)),
        damage=damaged,
        torn_line_numbers=list(loaded.torn_line_numbers),
        duplicate_records=sum(sel.duplicates.values()),
    )


def score_run(run_dir: Path, inputs: Path | None = None) -> ScoredRun:
    loaded = load_run(run_dir)
    return score_loaded(loaded, load_inputs(loaded.manifest, run_dir, inputs))

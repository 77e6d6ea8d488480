"""`lbeval score RUN`: one run's records -> scores, offline (no server).

What is computed (all from `runs/<variant>/<run_id>/`, plus the inputs manifest the run names):
    accuracy   official LongBench score per dataset and generation pass (cold, warm, repeat), with the
               secondary ROUGE-L column (Google's rouge-score) for English rouge datasets
    agreement  within the variant: cold/warm and warm/repeat pairs (text, token and first-token
               equality, first divergence with near-tie margins, top-k logprob delta and overlap) and
               the timing passes' first tokens (timing_cold r vs timing_warm r), unique outputs per prompt
    timing     per input: warm and cold prefill (server, ms) and TTFT (client, ms) over the repetitions
    cache      per pass: how many requests met their cache expectation; the salt and sibling controls

Which record counts (the selection rule, `select_final`):
    - A cold/warm/repeat group re-run after a server restart supersedes the older group of that input.
    - Per (dataset, id, pass, repetition) the last attempt counts: an invalid warm attempt 0 followed by
      an ok retry (attempt 1) is a valid sample; every invalid attempt is still counted.
    - A sample is scored only when its final record has status "ok"; "invalid" and "error" samples and
      missing records are counted in every denominator (k/N where N is every input), never dropped.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval.errors import DataError, LbevalError
from eval.prepare.dataset_specs import base_name, get_spec
from eval.prepare.inputs import InputRow, inputs_digest, read_inputs
from eval.records.run_folder import LoadedRun, RunManifest
from eval.records.types import PASSES, RequestRecord
from scorers import determinism, longbench
from scorers.longbench.normalize import first_line

SCORES_SCHEMA_VERSION = 1
SCORES_JSON = "scores.json"
SCORES_MD = "scores.md"
GENERATION_PASSES = ("cold", "warm", "repeat")
WARM_PASSES = ("warm", "repeat", "timing_warm")  # must hit the prefix cache
COLD_PASSES = ("cold", "timing_cold")  # must miss it
# the secondary column (Google rouge-score ROUGE-L): English rouge datasets only; its tokenizer drops
# non-ASCII text, so on rouge_zh datasets it would always be 0.0
SECONDARY_ROUGE_METRICS = ("rouge",)
# a divergence whose top-1/top-2 logprob margin is below this (nats) on either side is a near tie
NEAR_TIE_MARGIN = 0.1

Key = tuple[str, str]  # (dataset, example id)
SampleKey = tuple[str, str, str, int]  # (dataset, example id, pass, repetition)

# two-sided 95% Student t quantiles by degrees of freedom (per-input CIs over a few repetitions); above 12
# degrees of freedom the Cornish-Fisher expansion is within 0.0015 of the published table values
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
_T975.update({10: 2.228, 11: 2.201, 12: 2.179})
_Z975 = 1.959964


def t975(df: int) -> float:
    if df in _T975:
        return _T975[df]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


# ---------------------------------------------------------------- selection


@dataclass(frozen=True)
class Selection:
    final: dict[SampleKey, RequestRecord]
    invalid_attempts: dict[str, int]  # pass -> records with status invalid (every attempt counts)
    recovered: dict[str, int]  # pass -> samples whose final status is ok after an invalid attempt
    superseded: int  # records of cold/warm/repeat groups re-run after a server restart


def select_final(records: Iterable[RequestRecord]) -> Selection:
    """The record that counts for each (dataset, id, pass, repetition); see the module docstring."""
    records = list(records)
    latest_group: dict[Key, int] = {}
    for r in records:
        if r.pass_name in GENERATION_PASSES:
            k = (r.dataset, r.example_id)
            latest_group[k] = max(latest_group.get(k, r.group), r.group)
    final: dict[SampleKey, RequestRecord] = {}
    invalid: Counter[str] = Counter()
    had_invalid: set[SampleKey] = set()
    superseded = 0
    for r in records:
        if r.pass_name in GENERATION_PASSES and r.group != latest_group[(r.dataset, r.example_id)]:
            superseded += 1
            continue
        sk = (r.dataset, r.example_id, r.pass_name, r.repetition)
        if r.status == "invalid":
            invalid[r.pass_name] += 1
            had_invalid.add(sk)
        prev = final.get(sk)
        if prev is None or (r.group, r.attempt, r.seq) > (prev.group, prev.attempt, prev.seq):
            final[sk] = r
    recovered = Counter(sk[2] for sk in had_invalid if final[sk].status == "ok")
    return Selection(final, dict(invalid), dict(recovered), superseded)


def ok_record(sel: Selection, key: Key, pass_name: str, rep: int = 0) -> RequestRecord | None:
    rec = sel.final.get((key[0], key[1], pass_name, rep))
    return rec if rec is not None and rec.status == "ok" else None


# ---------------------------------------------------------------- accuracy


@dataclass(frozen=True)
class PassScore:
    score: float | None  # official LongBench dataset score (0-100, 2 decimals) over scored examples
    n_scored: int
    n_total: int  # every input of the dataset, including errored, invalid and missing samples
    rouge_l: float | None = None  # secondary: rouge-score ROUGE-L F (0-100), rouge datasets only


@dataclass(frozen=True)
class DatasetAccuracy:
    dataset: str
    metric: str
    passes: dict[str, PassScore]


def example_scores(
    rows: Sequence[InputRow], sel: Selection, pass_name: str
) -> dict[Key, tuple[float, float | None]]:
    """(official score 0..1, secondary ROUGE-L 0..1 or None) for each example with an ok sample."""
    out: dict[Key, tuple[float, float | None]] = {}
    for row in rows:
        rec = ok_record(sel, row.key, pass_name)
        if rec is None or rec.output_text is None:
            continue
        ds = base_name(row.dataset)
        spec = get_spec(ds)
        official = longbench.score_example(ds, rec.output_text, row.answers, row.all_classes)
        secondary = None
        if spec.metric in SECONDARY_ROUGE_METRICS:
            pred = first_line(rec.output_text) if spec.first_line_only else rec.output_text
            secondary = longbench.rouge_score_l(pred, row.answers)
        out[row.key] = (official, secondary)
    return out


def accuracy(
    rows: Sequence[InputRow], per_pass: Mapping[str, Mapping[Key, tuple[float, float | None]]]
) -> list[DatasetAccuracy]:
    by_ds: dict[str, list[InputRow]] = {}
    for row in rows:
        by_ds.setdefault(row.dataset, []).append(row)
    result = []
    for ds, ds_rows in by_ds.items():
        passes: dict[str, PassScore] = {}
        for pass_name, scores in per_pass.items():
            got = [scores[r.key] for r in ds_rows if r.key in scores]
            official = longbench.dataset_score([g[0] for g in got]) if got else None
            sec = [g[1] for g in got if g[1] is not None]
            rouge_l = longbench.dataset_score(sec) if sec else None
            passes[pass_name] = PassScore(official, len(got), len(ds_rows), rouge_l)
        result.append(DatasetAccuracy(ds, get_spec(ds).metric, passes))
    return result


# ---------------------------------------------------------------- agreement


@dataclass(frozen=True)
class Divergence:
    dataset: str
    example_id: str
    repetition: int
    position: int
    margin_a: float | None
    margin_b: float | None
    text_equal: bool

    @property
    def near_tie(self) -> bool:
        margins = [m for m in (self.margin_a, self.margin_b) if m is not None]
        return bool(margins) and min(margins) < NEAR_TIE_MARGIN


@dataclass(frozen=True)
class PairStats:
    """Agreement of pass_a vs pass_b. `n_total` counts every expected pair; only valid ones compare."""

    pass_a: str
    pass_b: str
    n_total: int
    n_pairs: int  # both samples ok
    text_equal: int
    tokens_equal: int
    first_token_equal: int
    max_delta: float | None  # max |logprob delta| over shared top-k ids at compared positions
    min_overlap: int | None  # min |top-k(a) & top-k(b)| at compared positions
    errors: int  # pairs with an errored sample
    invalid: int  # pairs with an invalid (cache-miss) sample
    missing: int  # pairs with a missing record
    divergences: list[Divergence] = field(default_factory=list)


@dataclass(frozen=True)
class Pair:
    key: Key
    repetition: int
    a: RequestRecord
    b: RequestRecord
    result: determinism.PairResult


def response(rec: RequestRecord) -> determinism.Response:
    topk = rec.topk.as_dicts() if rec.topk is not None else None
    return determinism.Response(rec.output_token_ids or [], rec.output_text or "", topk)


def _classify(a: RequestRecord | None, b: RequestRecord | None) -> str:
    if a is None or b is None:
        return "missing"
    statuses = {a.status, b.status}
    if "error" in statuses:
        return "error"
    if "invalid" in statuses:
        return "invalid"
    return "ok"


def collect_pairs(
    keys: Sequence[Key],
    sel: Selection,
    pass_a: str,
    pass_b: str,
    reps: int,
    sel_b: Selection | None = None,
) -> tuple[list[Pair], Counter[str]]:
    """Pairs (pass_a rep r, pass_b rep r) per key: pass_b is read from `sel_b` when given (another run)."""
    pairs: list[Pair] = []
    counts: Counter[str] = Counter()
    other = sel if sel_b is None else sel_b
    for key in keys:
        for rep in range(reps):
            a = sel.final.get((key[0], key[1], pass_a, rep))
            b = other.final.get((key[0], key[1], pass_b, rep))
            kind = _classify(a, b)
            counts[kind] += 1
            if kind == "ok" and a is not None and b is not None:
                pairs.append(Pair(key, rep, a, b, determinism.compare_pair(response(a), response(b))))
    return pairs, counts


def pair_stats(pass_a: str, pass_b: str, pairs: Sequence[Pair], counts: Mapping[str, int]) -> PairStats:
    bad = counts.get("error", 0) + counts.get("invalid", 0) + counts.get("missing", 0)
    agg = determinism.aggregate_pairs([p.result for p in pairs], errors=bad)
    divergences = [
        Divergence(
            p.key[0],
            p.key[1],
            p.repetition,
            p.result.first_divergence,
            p.result.margin_a,
            p.result.margin_b,
            p.result.text_equal,
        )
        for p in pairs
        if p.result.first_divergence is not None
    ]
    return PairStats(
        pass_a=pass_a,
        pass_b=pass_b,
        n_total=len(pairs) + bad,
        n_pairs=len(pairs),
        text_equal=agg.text_equal,
        tokens_equal=agg.tokens_equal,
        first_token_equal=agg.first_token_equal,
        max_delta=agg.max_delta,
        min_overlap=agg.min_overlap,
        errors=counts.get("error", 0),
        invalid=counts.get("invalid", 0),
        missing=counts.get("missing", 0),
        divergences=divergences,
    )


@dataclass(frozen=True)
class UniqueOutputs:
    n_prompts: int  # prompts with at least two ok generation samples
    n_multiple: int  # of those, prompts with more than one distinct output
    max_unique: int
    min_top_share: float | None


def unique_outputs(keys: Sequence[Key], sel: Selection) -> UniqueOutputs:
    n_prompts = n_multiple = max_unique = 0
    min_share: float | None = None
    for key in keys:
        texts = [r.output_text or "" for p in GENERATION_PASSES if (r := ok_record(sel, key, p)) is not None]
        if len(texts) < 2:
            continue
        n_unique, share = determinism.unique_outputs(texts)
        n_prompts += 1
        n_multiple += n_unique > 1
        max_unique = max(max_unique, n_unique)
        min_share = share if min_share is None else min(min_share, share)
    return UniqueOutputs(n_prompts, n_multiple, max_unique, min_share)


# ---------------------------------------------------------------- timing


@dataclass(frozen=True)
class Spread:
    """Mean over repetitions, with sample SD, range and a 95% Student-t interval of the mean."""

    n: int
    mean: float
    sd: float | None
    min: float
    max: float
    ci_low: float | None
    ci_high: float | None


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Spread(1, mean, None, values[0], values[0], None, None)
    sd = statistics.stdev(values)
    half = t975(len(values) - 1) * sd / math.sqrt(len(values))
    return Spread(len(values), mean, sd, min(values), max(values), mean - half, mean + half)


TIMING_MEASURES = {  # measure name -> the pass it is read from (see measure_ms)
    "warm_prefill_ms": "timing_warm",
    "cold_prefill_ms": "timing_cold",
    "warm_ttft_ms": "timing_warm",
    "cold_ttft_ms": "timing_cold",
}


def measure_ms(rec: RequestRecord, measure: str) -> float | None:
    if measure.endswith("prefill_ms"):
        value = (rec.server_metrics or {}).get("prefill_time_s")
    else:
        value = rec.timings.first_token_s if rec.timings is not None else None
    return None if value is None or not math.isfinite(value) else 1000.0 * value


def timing_values(sel: Selection, key: Key, measure: str, reps: int) -> list[float]:
    """One value per ok repetition of the measure's pass (None-valued samples are left out)."""
    out = []
    for rep in range(reps):
        rec = ok_record(sel, key, TIMING_MEASURES[measure], rep)
        value = measure_ms(rec, measure) if rec is not None else None
        if value is not None:
            out.append(value)
    return out


@dataclass(frozen=True)
class InputTiming:
    dataset: str
    example_id: str
    measures: dict[str, Spread | None]


@dataclass(frozen=True)
class Timing:
    reps: int
    concurrency: int | None
    per_input: list[InputTiming]
    means: dict[str, float | None]  # mean over inputs of the per-input means
    n_inputs: dict[str, int]  # inputs with at least one value, per measure
    valid: bool
    flags: list[str]


def timing(keys: Sequence[Key], sel: Selection, settings: Mapping[str, Any]) -> Timing:
    reps = int(settings.get("timing_reps") or 0)
    concurrency = settings.get("concurrency")
    per_input = [
        InputTiming(k[0], k[1], {m: spread(timing_values(sel, k, m, reps)) for m in TIMING_MEASURES})
        for k in keys
    ]
    means: dict[str, float | None] = {}
    n_inputs: dict[str, int] = {}
    for m in TIMING_MEASURES:
        vals = [s.mean for t in per_input if (s := t.measures[m]) is not None]
        means[m] = statistics.fmean(vals) if vals else None
        n_inputs[m] = len(vals)
    flags = timing_flags(keys, sel, reps, concurrency, n_inputs)
    valid = reps > 0 and concurrency == 1 and not any(f.startswith("invalid:") for f in flags)
    return Timing(reps, concurrency, per_input, means, n_inputs, valid, flags)


def timing_flags(
    keys: Sequence[Key], sel: Selection, reps: int, concurrency: Any, n_inputs: Mapping[str, int]
) -> list[str]:
    flags = []
    if reps == 0:
        flags.append("invalid: no timing passes in this run")
    if concurrency != 1:
        flags.append(f"invalid: timing needs concurrency 1, the run used {concurrency}")
    bad = Counter(
        rec.status
        for k in keys
        for p in ("timing_cold", "timing_warm")
        for r in range(reps)
        if (rec := sel.final.get((k[0], k[1], p, r))) is not None and rec.status != "ok"
    )
    if bad.get("invalid"):
        flags.append(f"{bad['invalid']} timing sample(s) invalid (cache state not as required), left out")
    if bad.get("error"):
        flags.append(f"{bad['error']} timing sample(s) errored, left out")
    if reps and not n_inputs["warm_prefill_ms"]:
        flags.append("server prefill time unavailable (no /metrics histogram deltas)")
    return flags


# ---------------------------------------------------------------- cache checks


@dataclass(frozen=True)
class CacheCheck:
    """`ok`: requests whose cached tokens met the pass's expectation, out of `n_total` expected ones."""

    pass_name: str
    expectation: str
    n_total: int
    ok: int
    reported: int  # records with usage.cached_tokens reported
    mean_cached: float | None
    invalid_attempts: int
    recovered: int
    errors: int
    missing: int


CACHE_EXPECTATIONS = {
    "cold": "0 cached tokens",
    "warm": "hit covering the prompt's full blocks",
    "repeat": "hit covering the prompt's full blocks",
    "timing_cold": "0 cached tokens",
    "timing_warm": "hit covering the prompt's full blocks",
    "control_salt": "0 cached tokens (new salt)",
    "control_sibling": "hit covering the shared context's blocks",
}


def meets_expectation(rec: RequestRecord) -> bool:
    cached = rec.usage.cached_tokens
    if cached is None or rec.status == "error":
        return False
    expected = rec.expected_cached_tokens
    if rec.pass_name in ("cold", "timing_cold", "control_salt"):
        return cached == 0
    if expected is None:
        return rec.status == "ok" and cached > 0
    return cached >= expected if expected > 0 else rec.status == "ok"


def cache_check(keys: Sequence[Key], sel: Selection, pass_name: str, reps: int) -> CacheCheck:
    recs = [sel.final.get((k[0], k[1], pass_name, r)) for k in keys for r in range(reps)]
    present = [r for r in recs if r is not None]
    cached = [r.usage.cached_tokens for r in present if r.usage.cached_tokens is not None]
    return CacheCheck(
        pass_name=pass_name,
        expectation=CACHE_EXPECTATIONS[pass_name],
        n_total=len(recs),
        ok=sum(meets_expectation(r) for r in present),
        reported=len(cached),
        mean_cached=statistics.fmean(cached) if cached else None,
        invalid_attempts=sel.invalid_attempts.get(pass_name, 0),
        recovered=sel.recovered.get(pass_name, 0),
        errors=sum(r.status == "error" for r in present),
        missing=len(recs) - len(present),
    )


# the runner's --passes choices -> the record passes they produce
PASS_CHOICES = {"timing": ("timing_cold", "timing_warm"), "controls": ("control_salt", "control_sibling")}


def passes_in_run(manifest: RunManifest, records: Sequence[RequestRecord]) -> list[str]:
    """The record passes of a run: those its settings asked for, plus any seen in its records."""
    configured = manifest.settings.get("passes")
    names = {str(p) for p in configured} if isinstance(configured, list | tuple) else set()
    for choice, produced in PASS_CHOICES.items():
        if choice in names:
            names.update(produced)
    if (manifest.settings.get("timing_reps") or 0) > 0:
        names.update(PASS_CHOICES["timing"])
    names.update(r.pass_name for r in records)
    return [p for p in PASSES if p in names]


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
    n_slots: int  # (example, pass, repetition) slots holding a final record; complete: == expected_records
    torn_lines: int
    superseded_records: int
    passes: list[str]
    settings: dict[str, Any]
    warnings: list[str]


@dataclass(frozen=True)
class InvalidCounts:
    """Cache-state failures: warm-condition requests (warm, repeat, timing_warm) that missed the prefix cache,
    cold-condition ones (cold, timing_cold) that hit it. Attempts count every invalid record; recovered ones
    were followed by an ok retry; final ones stayed invalid (never scored)."""

    warm_attempts: int
    warm_recovered: int
    warm_final: int
    cold_attempts: int
    cold_recovered: int
    cold_final: int


def invalid_counts(sel: Selection) -> InvalidCounts:
    finals = Counter(r.pass_name for r in sel.final.values() if r.status == "invalid")

    def total(counts: Mapping[str, int], passes: Sequence[str]) -> int:
        return sum(counts.get(p, 0) for p in passes)

    return InvalidCounts(
        total(sel.invalid_attempts, WARM_PASSES),
        total(sel.recovered, WARM_PASSES),
        total(finals, WARM_PASSES),
        total(sel.invalid_attempts, COLD_PASSES),
        total(sel.recovered, COLD_PASSES),
        total(finals, COLD_PASSES),
    )


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


@dataclass(frozen=True)
class ScoredRun:
    """Scores plus what compare needs from the raw data (pairs, example scores, inputs)."""

    loaded: LoadedRun
    rows: list[InputRow]
    selection: Selection
    example_scores: dict[str, dict[Key, tuple[float, float | None]]]  # pass -> key -> scores
    pairs: dict[str, list[Pair]]  # cold_warm, warm_repeat, timing_first_token
    scores: RunScores

    @property
    def keys(self) -> list[Key]:
        return [r.key for r in self.rows]


PAIR_KINDS = {  # name -> (pass a, pass b, repetitions are the timing reps)
    "cold_warm": ("cold", "warm", False),
    "warm_repeat": ("warm", "repeat", False),
    "timing_first_token": ("timing_cold", "timing_warm", True),
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


def score_loaded(loaded: LoadedRun, rows: list[InputRow]) -> ScoredRun:
    m = loaded.manifest
    sel = select_final(loaded.records)
    keys = [r.key for r in rows]
    passes = passes_in_run(m, loaded.records)
    reps = int(m.settings.get("timing_reps") or 0)
    ex_scores = {p: example_scores(rows, sel, p) for p in GENERATION_PASSES if p in passes}
    pairs: dict[str, list[Pair]] = {}
    agreement: dict[str, PairStats | None] = {}
    for name, (pa, pb, timed) in PAIR_KINDS.items():
        if pa not in passes or pb not in passes:
            agreement[name] = None
            continue
        found, counts = collect_pairs(keys, sel, pa, pb, reps if timed else 1)
        pairs[name] = found
        agreement[name] = pair_stats(pa, pb, found, counts)
    cache = [cache_check(keys, sel, p, reps if p.startswith("timing") else 1) for p in passes]
    finals = list(sel.final.values())
    scores = RunScores(
        run=run_info(loaded, passes, sel),
        n_inputs=len(rows),
        datasets=list(dict.fromkeys(r.dataset for r in rows)),
        accuracy=accuracy(rows, ex_scores),
        agreement=agreement,
        unique=unique_outputs(keys, sel),
        timing=timing(keys, sel, m.settings),
        cache=cache,
        errors=sum(r.status == "error" for r in finals),
        invalid=invalid_counts(sel),
    )
    return ScoredRun(loaded, rows, sel, ex_scores, pairs, scores)


def run_info(loaded: LoadedRun, passes: list[str], sel: Selection) -> RunInfo:
    m = loaded.manifest
    warnings = list(m.warnings) + [str(w) for w in (m.probe.get("warnings") or [])]
    if loaded.torn_lines:
        warnings.append(f"{loaded.torn_lines} torn record line(s) dropped (a killed writer)")
    if not m.complete:
        warnings.append("the run is incomplete (not every planned request has a record)")
    return RunInfo(
        variant=m.variant,
        run_id=m.run_id,
        run_dir=str(loaded.run_dir),
        model=m.model,
        inputs_path=m.inputs_path,
        inputs_sha256=m.inputs_sha256,
        complete=bool(m.complete),
        started_at=m.started_at,
        ended_at=m.ended_at,
        expected_records=m.expected_records,
        n_records=len(loaded.records),
        n_slots=len(sel.final),
        torn_lines=loaded.torn_lines,
        superseded_records=sel.superseded,
        passes=passes,
        settings=dict(m.settings),
        warnings=list(dict.fromkeys(warnings)),
    )


def resolve_run(arg: str, runs_root: Path) -> Path:
    """RUN as given: a run folder (holding manifest.json), or a variant name -> its latest run under runs_root.

    The latest run: the one `runs_root/<variant>/LATEST` names (the runner writes it after each run), else
    the one whose manifest has the newest `started_at`.
    """
    from eval.records.run_folder import MANIFEST_NAME, read_manifest

    path = Path(arg)
    if (path / MANIFEST_NAME).is_file():
        return path
    variant_dir = runs_root / arg
    if "/" in arg or arg in ("", ".", ".."):
        raise LbevalError(f"{arg}: not a run folder (no {MANIFEST_NAME})")
    latest = variant_dir / "LATEST"
    if latest.is_file():
        named = variant_dir / latest.read_text(encoding="utf-8").strip()
        if "/" not in named.name and (named / MANIFEST_NAME).is_file():
            return named
    candidates = []
    if variant_dir.is_dir():
        for child in sorted(variant_dir.iterdir()):
            if (child / MANIFEST_NAME).is_file():
                m = read_manifest(child)
                if m.variant == arg:
                    candidates.append((m.started_at or "", child.name, child))
    if not candidates:
        raise LbevalError(
            f"{arg}: not a run folder (no {MANIFEST_NAME}) and no run of a variant named {arg!r} under {runs_root}/"
        )
    return max(candidates)[2]


def score_run(run_dir: Path, inputs: Path | None = None) -> ScoredRun:
    from eval.records.run_folder import load_run

    loaded = load_run(run_dir)
    return score_loaded(loaded, load_inputs(loaded.manifest, run_dir, inputs))


# ---------------------------------------------------------------- output


def to_jsonable(obj: Any) -> Any:
    """Dataclasses -> dicts; NaN/inf (never expected) -> None so the JSON stays standard."""
    if hasattr(obj, "__dataclass_fields__"):
        return to_jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def scores_json(scored: ScoredRun) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(scored.scores)  # NaN/inf -> null
    data["examples"] = [
        {
            "dataset": row.dataset,
            "id": row.id,
            "scores": {
                p: (s[row.key][0] if row.key in s else None) for p, s in scored.example_scores.items()
            },
        }
        for row in scored.rows
    ]
    return data


def write_scores(scored: ScoredRun) -> tuple[Path, Path]:
    from eval.report.markdown import scores_markdown

    run_dir = scored.loaded.run_dir
    json_path, md_path = run_dir / SCORES_JSON, run_dir / SCORES_MD
    atomic_write(
        json_path, json.dumps(scores_json(scored), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    )
    atomic_write(md_path, scores_markdown(scored.scores))
    return json_path, md_path


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise LbevalError(f"{path}: cannot write ({exc.strerror})") from None

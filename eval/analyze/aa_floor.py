"""The A/A floor: how far the paired timing figures move when nothing changed (`lbeval ab X X`).

An A/A session runs one configuration on both sides of `lbeval ab` (one server used as both sides, or the same
launch spec on two servers). Per timing measure (eval/analyze/timing.TIMING_MEASURES) its two runs give the
gated change of adjacent requests, the interval the timing rules read: the 20 % trimmed mean of the per-input
mean log ratios with Yuen's 97.5 % interval (scorers.paired_timing.gated_timing_change), computed
exactly as compare computes an interleaved change. The floor of a measure is the largest |end| of that
interval, in percent: what two identical configurations show on this machine, in this session, in the
interval the rule judges.

What counts as "the same configuration" (else AaFloorError, exit 2, one line naming the difference):
- the two runs carry one session's pairing (eval/analyze/ab_timing.session_pairs): two separate `lbeval run`s
  have no pairing and are refused;
- one variant name on both sides: lbeval names a server configuration by its variant, so `lbeval ab X Y` is an
  A/B even when X and Y share a launch spec;
- the same served model, inputs manifest, run settings (every key of the manifest's settings) and the same
  server facts from the probe (eval/records/server_identity.SERVER_IDENTITY_KEYS: server kind and version,
  model, block size, context length, prefix caching, cold mode; the cache model when both have one);
- both runs complete and undamaged (missing or damaged data never calibrates a gate).
Against the runs it calibrates (`check_against`): the A/A runs must have asked the same inputs (the inputs
manifest's SHA-256) of the same model as the compared base and variant runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from eval.analyze.ab_timing import PairedMeasure, interleaved_timing, session_pairs
from eval.analyze.score import ScoredRun
from eval.analyze.timing import TIMING_MEASURES
from eval.errors import LbevalError
from eval.records.run_folder import PAIRS_NAME
from eval.records.server_identity import server_differences


class AaFloorError(LbevalError):
    """The A/A runs cannot calibrate: not one ab session, not the same configuration, or other inputs."""

    exit_code = 2  # no verdict (as compare's MismatchError): the data cannot calibrate the gate


@dataclass(frozen=True)
class AaMeasure:
    """One timing measure of an A/A session: the gated change [97.5% Yuen interval] (%) and its floor (%)."""

    measure: str
    n_inputs: int
    n_pairs: int
    left_out: int
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    floor_pct: float | None  # max(|ci_low|, |ci_high|); None: too few pairs for an interval
    drifting: bool  # the drift check flagged the session (the paired ratio or a side's own times)
    paired_drift: bool  # the paired ratio itself drifted: the floor depends on when it was measured
    reading: str  # the drift check in words ("" without one)


@dataclass(frozen=True)
class AaFloor:
    variant: str
    runs: tuple[str, str]  # "<variant>/<run_id>" of side a and of side b
    ab_id: str
    inputs_sha256: str
    model: str
    seed: int
    pairs: int
    adjacent: int
    measures: dict[str, AaMeasure] = field(default_factory=dict)

    def floor(self, measure: str) -> float | None:
        m = self.measures.get(measure)
        return m.floor_pct if m is not None else None


def _name(run: ScoredRun) -> str:
    return f"{run.scores.run.variant}/{run.scores.run.run_id}"


def _measure(pm: PairedMeasure) -> AaMeasure:
    p = pm.gated  # the interval the timing rules read (not the bootstrap of pm.paired)
    d = pm.drift
    paired_drift = d is not None and d.paired.verdict == "drift"
    if p is None:
        return AaMeasure(
            pm.measure,
            0,
            pm.n_pairs,
            pm.left_out,
            None,
            None,
            None,
            None,
            pm.drifting,
            paired_drift,
            pm.reading,
        )
    floor = max(abs(p.ci_low), abs(p.ci_high))
    return AaMeasure(
        pm.measure, p.n_inputs, pm.n_pairs, pm.left_out, p.estimate, p.ci_low, p.ci_high, floor,
        pm.drifting, paired_drift, pm.reading,
    )  # fmt: skip


def same_configuration_problems(a: ScoredRun, b: ScoredRun) -> list[str]:
    """Why the two runs of an ab session are not one configuration measured twice (empty: they are)."""
    ma, mb = a.loaded.manifest, b.loaded.manifest
    problems = []
    if ma.variant != mb.variant:
        problems.append(
            f"its sides are two variants ({ma.variant}, {mb.variant}); an A/A session is lbeval ab X X"
        )
    if ma.model != mb.model:
        problems.append(f"its sides served different models ({ma.model}, {mb.model})")
    if ma.inputs_sha256 != mb.inputs_sha256:
        problems.append("its sides asked different inputs (inputs_sha256)")
    for key, in_a, in_b in ma.settings.differences(mb.settings):
        problems.append(f"its sides differ in settings.{key} ({in_a!r}, {in_b!r})")
    for key, in_a, in_b in server_differences(ma.probe, mb.probe):
        problems.append(f"its servers differ in {key} ({in_a!r}, {in_b!r})")
    return problems


def _data_problems(run: ScoredRun) -> list[str]:
    info = run.scores.run
    out = [f"{_name(run)} is damaged: {d}" for d in info.damage]
    if not info.complete and not info.damage:
        out.append(f"{_name(run)} is incomplete ({info.n_slots}/{info.expected_records} planned requests)")
    if not run.scores.timing.valid:
        flags = [f for f in run.scores.timing.flags if f.startswith("invalid:")] or ["invalid"]
        out.append(f"{_name(run)} timing is {flags[0]}")
    return out


def aa_floor(a: ScoredRun, b: ScoredRun, *, seed: int, resamples: int) -> AaFloor:
    """The A/A floor of the two runs of one `lbeval ab X X` session; AaFloorError when they cannot give one."""
    where = f"A/A runs {_name(a)} and {_name(b)}"
    if a.loaded.run_dir.resolve() == b.loaded.run_dir.resolve():
        raise AaFloorError(f"{where}: the same run folder twice; give the two runs lbeval ab X X printed")
    pairs = session_pairs(a, b)
    paired = interleaved_timing(a, b, seed, resamples) if pairs is not None else None
    if pairs is None or paired is None or set(pairs[0].runs) != {_name(a), _name(b)}:
        raise AaFloorError(
            f"{where}: not one lbeval ab session (no common pairing, {PAIRS_NAME} in both run folders)"
        )
    problems = same_configuration_problems(a, b) + _data_problems(a) + _data_problems(b)
    if problems:
        raise AaFloorError(f"{where}: not an A/A calibration: {problems[0]}")
    if not any(pm.gated is not None for pm in paired.measures.values()):
        raise AaFloorError(f"{where}: no timing measure has two inputs with adjacent timing pairs")
    ma = a.loaded.manifest
    return AaFloor(
        variant=ma.variant,
        runs=(_name(a), _name(b)),
        ab_id=paired.ab_id,
        inputs_sha256=ma.inputs_sha256,
        model=ma.model,
        seed=seed,
        pairs=paired.pairs,
        adjacent=paired.adjacent,
        measures={m: _measure(paired.measures[m]) for m in TIMING_MEASURES if m in paired.measures},
    )


def check_against(floor: AaFloor, base: ScoredRun, variant: ScoredRun) -> None:
    """AaFloorError unless the A/A runs asked the compared runs' inputs of the same model."""
    for side, run in (("base", base), ("variant", variant)):
        m = run.loaded.manifest
        if m.inputs_sha256 != floor.inputs_sha256:
            raise AaFloorError(
                f"A/A runs {floor.runs[0]} and {floor.runs[1]} asked other inputs than the {side} run "
                f"{_name(run)} (inputs_sha256 {floor.inputs_sha256[:12]}…, {m.inputs_sha256[:12]}…)"
            )
        if m.model != floor.model:
            raise AaFloorError(
                f"A/A runs {floor.runs[0]} and {floor.runs[1]} served model {floor.model}, the {side} run "
                f"{_name(run)} {m.model}"
            )


FloorPosition = Literal[
    "slower beyond the floor", "faster beyond the floor", "within the floor", "overlaps the floor"
]


def position(low: float, high: float, floor: float) -> FloorPosition:
    """Where a change's 95% CI [low, high] (%) lies against the A/A floor +-floor: wholly beyond it (the change
    is larger than two identical configurations show), wholly inside it, or across its edge (undecided)."""
    if low > floor:
        return "slower beyond the floor"
    if high < -floor:
        return "faster beyond the floor"
    if -floor <= low and high <= floor:
        return "within the floor"
    return "overlaps the floor"

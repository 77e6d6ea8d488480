"""What the gate's `cross_variant_cold` rule (eval/gate/ruleset/cross_variant_cold.py) judges: the variant's cold
outputs against the base's, against the engine's own noise (documented in eval/gate/policy_default.toml and
docs/gate.md); `base_noise` is cause_rows' noise too.

Per input, base cold vs variant cold (the same prompt, each computed from scratch) must have equal token IDs and a
max |top-k logprob delta| within the largest BENIGN numerics difference the base measured in its own attribution
rows, times `delta_factor`, and at least `delta_floor`:

    limit = max(noise x delta_factor, delta_floor)

The base's benign rows are the ones a correct engine varies on by itself (BENIGN_SCENARIOS): batch composition
(batch, batch_warm and their sizes), repeats of the very same request (alone and batched) and, with replicas,
the same request on another server. Their largest max |delta| is the noise; a base that measured none of them
(`--scenarios cache`) has noise 0 and the floor alone applies, which the rule says. A token divergence is noise
only when the base's own benign rows flipped tokens too and the divergence is at a near tie (top-1/top-2 margin
< NEAR_TIE_MARGIN on either side). At least `min_fraction` of the inputs must be within the limit (N counts every
input: an errored, invalid or missing cold sample in either run is not within it).

A variant that changes numerics on purpose declares it (eval/serve/numerics.py): `numerics = "changed: REASON"` in
its launch spec (carried into the run's manifest, each session's `numerics` and `launch_spec`) or in the policy's
`[rules.cross_variant_cold]` table. The rule then PASSES naming who declared it and why, with what it measured;
a declaration that is malformed, or that the sessions of one run disagree on, is no data (never a pass).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.analyze.agreement import NEAR_TIE_MARGIN
from eval.analyze.attribution import Attribution
from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.errors import ConfigError
from eval.serve.numerics import declared_reason

# the attribution scenarios whose rows a correct engine varies on by itself (eval/records/scenarios.py names)
BENIGN_SCENARIOS = ("batch", "repeats", "replicas")
SPEC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class BaseNoise:
    """The largest benign numerics difference the base measured in its own rows."""

    max_delta: float  # the largest max |top-k logprob delta| over the benign rows (0: none, or none compared)
    row: str | None  # the row it was measured on
    rows: int  # benign rows with at least one compared pair
    flips: bool  # a benign row has pairs whose tokens differ (the engine's noise flips near ties)


@dataclass(frozen=True)
class InputPair:
    """One input's base cold vs variant cold (both samples ok)."""

    name: str  # dataset/example_id
    tokens_equal: bool
    max_delta: float | None  # over the positions compared (up to and including a divergence)
    divergence: int | None
    near_tie: bool  # the divergence is at a near tie on either side


@dataclass(frozen=True)
class Declaration:
    by: str  # who declared it: "the policy", "the variant run's launch spec cpu-smollm2-fp8kv"
    reason: str


@dataclass(frozen=True)
class Judgement:
    within: int  # inputs within the limit
    n_total: int  # every input
    limit: float
    outside: list[tuple[str, str]]  # (input, why), in input order


def base_noise(a: Attribution | None) -> BaseNoise:
    rows = [
        r
        for r in (a.rows if a is not None else [])
        if r.measured and r.scenario in BENIGN_SCENARIOS and r.pairs is not None and r.pairs.n_pairs > 0
    ]
    deltas = [
        (r.pairs.max_delta, r.key) for r in rows if r.pairs is not None and r.pairs.max_delta is not None
    ]
    delta, where = max(deltas, key=lambda d: d[0]) if deltas else (0.0, None)
    flips = any(r.pairs is not None and r.pairs.tokens_equal < r.pairs.n_pairs for r in rows)
    return BaseNoise(float(delta), where, len(rows), flips)


def engine_step(a: Attribution | None) -> tuple[float, str | None]:
    """The smallest logprob change the base showed on any row it measured, and that row ((0.0, None): none):
    the engine's own step. A bf16 engine moves a logprob by one step of about 0.016 or not at all, on partial
    hits and in batches alike, so a benign row the base happened to run alike (0) may show that step in another
    run of the same server; dense fp32 (3e-5) leaves the floor in charge. The smallest, not the largest, so a
    row the base itself gets wrong cannot widen the limit."""
    steps = [
        (r.pairs.max_delta, r.key)
        for r in (a.rows if a is not None else [])
        if r.measured and r.pairs is not None and r.pairs.max_delta is not None and r.pairs.max_delta > 0
    ]
    return min(steps) if steps else (0.0, None)


def delta_limit(noise: BaseNoise, p: Mapping[str, Any]) -> float:
    return max(noise.max_delta * float(p["delta_factor"]), float(p["delta_floor"]))


def outside_why(pair: InputPair, noise: BaseNoise, limit: float) -> str:
    """Why one input is outside the base's noise ("": within it)."""
    if not pair.tokens_equal and not (noise.flips and pair.near_tie):
        return f"token IDs differ from token {pair.divergence}"
    if pair.max_delta is not None and pair.max_delta > limit:
        return f"max |delta| {pair.max_delta:.3g}"
    return ""


def judge(pairs: Sequence[InputPair], n_total: int, noise: BaseNoise, p: Mapping[str, Any]) -> Judgement:
    """The compared inputs against the limit; the inputs not compared (n_total - len(pairs)) are outside."""
    limit = delta_limit(noise, p)
    outside = [(x.name, why) for x in pairs if (why := outside_why(x, noise, limit))]
    return Judgement(len(pairs) - len(outside), n_total, limit, outside)


def input_pairs(c: Comparison) -> list[InputPair]:
    out = []
    for cross in c.cross:
        for pair in cross.pairs:
            r = pair.result
            margins = [m for m in (r.margin_a, r.margin_b) if m is not None]
            out.append(
                InputPair(
                    f"{pair.key[0]}/{pair.key[1]}",
                    r.tokens_equal,
                    r.topk_max_abs_delta,
                    r.first_divergence,
                    bool(margins) and min(margins) < NEAR_TIE_MARGIN,
                )
            )
    return out


# ---------------------------------------------------------------- declarations


def run_declaration(side: str, run: ScoredRun) -> Declaration | None:
    """The declaration every session of the run carried from its launch spec (None: none declared);
    ConfigError when one is malformed or the sessions disagree (which server wrote the records is unknown)."""
    info = run.scores.run
    said = set()
    for i, s in enumerate(run.loaded.manifest.sessions):
        where = f"{side} run {info.run_id}: manifest session {i + 1}"
        reason = declared_reason(s.numerics, f"{where}: numerics")
        spec = s.launch_spec
        if reason and not (isinstance(spec, str) and SPEC_NAME.match(spec)):
            raise ConfigError(f"{where}: launch_spec must name the spec that declared numerics, got {spec!r}")
        said.add((reason, spec if reason else None))
    if len(said) > 1:
        raise ConfigError(
            f"{side} run {info.run_id}: its sessions disagree on the declared numerics change "
            "(resumed with another launch spec): which server wrote the records is unknown"
        )
    if not said or not next(iter(said))[0]:
        return None
    reason, spec = next(iter(said))
    return Declaration(f"the {side} run's launch spec {spec}", reason)

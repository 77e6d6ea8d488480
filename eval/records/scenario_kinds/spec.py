"""What a scenario is, as data, and the registry of scenarios by name.

A scenario is one `ScenarioSpec`, defined and registered (`register`) by its own module: eval/records/scenario_kinds/
<name>.py for the scenarios beyond cache, eval/records/scenarios.py for the cache scenario (its passes are the
pass vocabulary's own). Every stage lists the scenarios from this registry (`registered`), in `order`:
    records   the record passes of each scenario (vocabulary.SCENARIO_PASSES), `--scenarios` choices
    run       the planner registered under the same name (eval/run/scenarios/<name>.py)
    analyze   the attribution rows of each scenario's `pairs` (eval/analyze/attribution.py)
    gate      the rules a scenario brings (`rules`, by rule name)
    report    the attribution table, one row per pair of each scenario

A name is registered once: a second scenario of the same name is refused (ValueError). `unregister` is for a test
that registers a toy scenario and takes it away again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# `RequestRecord.variation` keys shared by several scenarios (each scenario's own keys are in its module)
BATCH_SIZE = "batch_size"  # requests in flight together (1: alone)
SLOT = "slot"  # position in the batch: 0 the member, 1..B-1 the fillers
INPUT = "input"  # "dataset/id" of the input whose prompt a filler or noise request sent


@dataclass(frozen=True)
class PairDef:
    """Pairs a scenario compares: `b` (the measured request) against `a` (the reference) of the same input,
    one sub-row per value of the variation key `by` (None: one row). `sub_row`: the pair's row is a sub-row of
    the scenario's first pair, shown only when the scenario was measured."""

    key: str  # attribution row key
    cause: str  # what the row attributes a difference to
    a: str  # reference record pass
    b: str  # measured record pass
    by: str | None
    held_fixed: str
    varied: str
    sub_row: bool = False


@dataclass(frozen=True)
class ScenarioSpec:
    """One scenario: what it isolates, its record passes, how its units are planned and what they cost, the pairs
    its attribution rows compare, and the gate rules it brings (by rule name)."""

    name: str
    isolates: str
    passes: tuple[str, ...]
    units: str  # how its units are planned
    cost: str  # requests per input
    pairs: tuple[PairDef, ...]
    order: int = 100  # where it is listed: scenarios in ascending order, then by name
    rules: tuple[str, ...] = ()  # the gate rules that judge its rows
    settings: tuple[str, ...] = ()  # the manifest settings (RunManifest.settings keys) it adds
    head: str | None = None  # its cause row's key and cause, when not its first pair's
    spans_replicas: bool = False  # its unit sends to every replica of the run (in each replica's turn)
    benign: bool = False  # a correct engine may vary on what it varies by itself (batch composition, noise)
    default_plan: bool = (
        False  # in the default plan (eval/records/scenarios.DEFAULT_PLAN): its cost is paid by every run
    )


_REGISTRY: dict[str, ScenarioSpec] = {}


def register(spec: ScenarioSpec) -> ScenarioSpec:
    """Add a scenario; a name, a pass or a row key another scenario holds is refused (ValueError)."""
    if spec.name in _REGISTRY:
        raise ValueError(f"scenario {spec.name!r} is registered twice")
    for other in _REGISTRY.values():
        shared = set(spec.passes) & set(other.passes)
        keys = {p.key for p in spec.pairs} & {p.key for p in other.pairs}
        if shared or keys:
            what = f"pass {sorted(shared)[0]!r}" if shared else f"row {sorted(keys)[0]!r}"
            raise ValueError(f"scenario {spec.name!r}: {what} belongs to scenario {other.name!r}")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Take a registered scenario away (a test's toy scenario); KeyError when none has that name."""
    del _REGISTRY[name]


def registered() -> tuple[ScenarioSpec, ...]:
    """Every registered scenario, in `order` (then by name)."""
    return tuple(sorted(_REGISTRY.values(), key=lambda s: (s.order, s.name)))


def names() -> tuple[str, ...]:
    return tuple(s.name for s in registered())


def spec_of(name: str) -> ScenarioSpec:
    """The scenario of that name; KeyError naming the registered ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no scenario {name!r} (registered: {', '.join(names())})") from None


def is_registered(name: str) -> bool:
    return name in _REGISTRY


def spans_replicas(name: str) -> bool:
    """Whether the scenario of that name sends its unit to every replica (False for a name not registered)."""
    spec = _REGISTRY.get(name)
    return spec is not None and spec.spans_replicas


def pass_owner(pass_name: str) -> str | None:
    """The scenario whose passes include `pass_name`, None when none does."""
    return next((s.name for s in _REGISTRY.values() if pass_name in s.passes), None)


def all_pairs() -> Iterator[tuple[ScenarioSpec, PairDef]]:
    for s in registered():
        for p in s.pairs:
            yield s, p

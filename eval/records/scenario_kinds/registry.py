"""The registry with every scenario module of this package loaded: import the registry from here.

Each module of eval/records/scenario_kinds/ other than spec.py, parts.py and this one defines one scenario and registers
it when imported; this module imports them all (found on disk, so a new scenario is one new module), then
re-exports the registry's functions (eval/records/scenario_kinds/spec.py).
"""

from __future__ import annotations

import importlib
import pkgutil

import eval.records.scenario_kinds as package
from eval.records.scenario_kinds.spec import (
    PairDef,
    ScenarioSpec,
    all_pairs,
    is_registered,
    names,
    pass_owner,
    register,
    registered,
    spans_replicas,
    spec_of,
    unregister,
)

NOT_SCENARIOS = ("parts", "registry", "spec")  # the registry itself, and the later stages' parts by name
MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name not in NOT_SCENARIOS))
for module in MODULES:
    importlib.import_module(f"{package.__name__}.{module}")

__all__ = [
    "MODULES",
    "PairDef",
    "ScenarioSpec",
    "all_pairs",
    "is_registered",
    "names",
    "pass_owner",
    "register",
    "registered",
    "spans_replicas",
    "spec_of",
    "unregister",
]

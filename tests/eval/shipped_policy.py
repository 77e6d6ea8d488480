"""What the shipped policy (eval/gate/policy_default.toml) enables, read from the file with tomllib rather than
through the gate. Tests that state how many rules a verdict checked count them from here: the rules the file
enables, less those the comparison leaves unchecked (named in the test). Shipping a new rule (docs/guide-new-rule.md)
that holds on a test's runs then changes none of those tests; a rule that fails or is skipped on them does."""

from __future__ import annotations

from pathlib import Path

import tomllib

POLICY = Path(__file__).resolve().parents[2] / "eval" / "gate" / "policy_default.toml"
# what it leaves unchecked on two sequential runs: the timing rules judge only an interleaved session
SEQUENTIAL = ("warm_prefill_change", "cold_prefill_change")
# ... of tests/eval/runfactory.py's base_and_variant, which run no hitlen scenario either
RUNFACTORY = ("hitlen_cache_honoured", *SEQUENTIAL)


def enabled_rules() -> list[str]:
    """The rules whose table in the shipped policy says `enabled = true`."""
    tables = tomllib.loads(POLICY.read_text(encoding="utf-8"))["rules"]
    return [name for name, table in tables.items() if table["enabled"] is True]


def checked_rules(*unchecked: str) -> int:
    """How many rules the shipped policy checks (PASS or FAIL) on a comparison where the named enabled rules are
    skipped or have no data."""
    enabled = enabled_rules()
    assert set(unchecked) <= set(enabled), sorted(set(unchecked) - set(enabled))
    return len(enabled) - len(set(unchecked))

"""The one-screen summary of `lbeval compare` and `lbeval gate` on a demo-like comparison: an interleaved session
(lbeval ab) of two fake servers over 12 inputs of two datasets, every pass, 3 timing repetitions, the batch,
hitlen and repeats scenarios on 2 inputs, where the variant changes numerics everywhere (every output diverges
from the base's, as an fp8 KV cache does) and, inside the variant, the repeats and partial-hit rows differ too.

The summary fits 40 lines and still names every row a rule fails on; when the cold outputs differ across the
variants it says so first. Figures come from the fake's rules (tests/support/fake_server.py), not from the code
under test.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from eval.analyze.agreement import PairStats
from eval.analyze.compare import Comparison
from eval.cli import main
from eval.report.console import numerics_changed
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault, PrefixEffect

LIMIT = 40
SCENARIOS = ScenarioSettings(
    scenarios=("cache", "batch", "hitlen", "repeats"),
    batch_sizes=(1, 4),
    repeats=4,
    hit_lengths=(15, 16, 17, 31, 32, 33),
    inputs=2,
)
PASSES = ("cold", "warm", "repeat", "timing", "controls")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("demo-like")
    rows = [make_row(i, words=40 + 3 * i, dataset="qasper") for i in range(6)]
    rows += [make_row(i, words=42 + 3 * i, dataset="gov_report") for i in range(6, 12)]
    inputs = write_rows(tmp / "inputs.jsonl", rows)
    with FakeServer() as a, FakeServer() as b:
        for i in range(10):  # 10 of the 12 inputs: every request of theirs diverges from position 3
            b.add_fault(Fault("divergence", match=f"Example ex{i}:", times=-1, position=3))
        b.add_fault(Fault("jitter", times=-1, amount=0.25))  # and every logprob moves by 0.25
        b.repeat_flips = set(range(3, 60, 2))  # inside the variant: every other send of a prompt from the 4th
        b.repeat_flip_position = 1
        b.prefix_effect = PrefixEffect(residue=1, position=1)  # and a partial hit at 17 or 33 tokens
        ca = config_for(a, inputs, tmp / "runs", variant="base", passes=PASSES, timing_reps=3)
        ca = replace(ca, scenarios=SCENARIOS)
        execute_ab(
            AbConfig(ca, replace(ca, variant="fp8", topology=endpoints(b.base_url)), seed=0, quiet=True)
        )
    return tmp / "runs"


def _failing_rows(runs: Path) -> dict[str, list[str]]:
    """rule -> the rows it fails on, from summary.json's verdict (what the gate decided, not what it printed)."""
    data = json.loads((runs / "compare" / "base__fp8" / "summary.json").read_text(encoding="utf-8"))
    return {
        r["rule"]: [ref["row"] for ref in r["rows"] if ref["failed"]]
        for r in data["verdict"]["results"]
        if r["status"] == "fail"
    }


def _times_named(key: str, out: str) -> int:
    return len(re.findall(rf"(?<![\w]){re.escape(key)}(?![\w])", out))


def test_compare_fits_one_screen_naming_every_failing_row_once(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", "base", "fp8", "--runs", str(runs)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) <= LIMIT, out
    failing = _failing_rows(runs)
    cause_rows = failing["cause_rows"]
    # 10 rows: cold/warm and warm/repeat, hitlen and its 4 classes whose outputs moved, repeats and both sub-rows
    assert len(cause_rows) == 10, failing
    assert "hitlen_L_33" in cause_rows and "repeats_alone" in cause_rows
    for key in cause_rows:  # named once, in the causes block, with its figures
        assert _times_named(key, out) == 1, (key, out)
    text = " ".join(out.split())
    assert "FAIL cause_rows: fails on 10 of the 16 rows it judged (marked FAIL under causes)" in text
    assert "tokens equal 10/12 vs base 12/12" not in text  # the rule's detail is not repeated
    # 10 of the 12 inputs diverge from token 3 on the variant; every logprob moved by 0.25
    numerics = next(i for i, line in enumerate(lines) if line.startswith("numerics "))
    causes = next(i for i, line in enumerate(lines) if line.startswith("causes "))
    assert numerics < causes
    assert (
        "numerics changed everywhere: cold outputs equal 2/12 across variants (token IDs), max top-k |delta| "
        "0.25 (floor 0.01)" in text
    )
    assert "10 cause row(s) also differ from the base" in text
    assert "FAIL cause_rows: cache_cold_warm 10/12 vs 12/12" in text


def test_gate_names_the_cause_rows_once_and_refers_to_them(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["compare", "base", "fp8", "--runs", str(runs)])  # summary.json: the rows the verdict fails on
    capsys.readouterr()
    assert main(["gate", "base", "fp8", "--runs", str(runs)]) == 1
    out = capsys.readouterr().out
    joined = re.sub(r"\n {11}(?=\S)", " ", out)  # one line per rule again
    line = next(x for x in joined.splitlines() if x.startswith("  FAIL     cause_rows:"))
    assert line.startswith(
        "  FAIL     cause_rows: measured fails on 10 of the 16 rows it judged (marked FAIL under causes); "
        "threshold per row measured by both"
    ), line
    assert "tokens equal" not in line  # the rows' figures are on the causes lines, not repeated here
    body = out.split("  FAIL     cause_rows:")[0]
    for key in _failing_rows(runs)["cause_rows"]:
        assert _times_named(key, body) == 1, (key, body)


def _cold(tokens_equal: int, n: int, delta: float | None, n_pairs: int | None = None) -> Comparison:
    stats = PairStats(
        pass_a="cold", pass_b="cold", n_total=n, n_pairs=n if n_pairs is None else n_pairs,
        text_equal=tokens_equal, tokens_equal=tokens_equal, first_token_equal=tokens_equal,
        max_delta=delta, min_overlap=None, errors=0, invalid=0, missing=0,
    )  # fmt: skip
    return cast(Comparison, SimpleNamespace(cross_agreement={"cold": stats}))


@pytest.mark.parametrize(
    ("tokens_equal", "n", "delta", "n_pairs", "expected"),
    [
        (4, 4, 3.4e-5, None, ""),  # kernel noise: nothing said
        (4, 4, 0.01, None, ""),  # at the floor: not above it
        (4, 4, 0.3, None, "cold outputs equal 4/4 across variants (token IDs), max top-k |delta| 0.3"),
        (2, 12, 2.92, None, "cold outputs equal 2/12 across variants (token IDs), max top-k |delta| 2.92"),
        (11, 12, 0.0, None, "cold outputs equal 11/12 across variants (token IDs), max top-k |delta| 0"),
        (4, 4, math.nan, None, "max top-k |delta| n/a"),  # a non-finite delta moved
        (0, 4, None, 0, ""),  # no pair both ok: errors are not numerics
    ],
)
def test_numerics_line(
    tokens_equal: int, n: int, delta: float | None, n_pairs: int | None, expected: str
) -> None:
    text = numerics_changed(_cold(tokens_equal, n, delta, n_pairs), delta_floor=0.01)
    if not expected:
        assert text == ""
    else:
        assert text.startswith("changed everywhere: ") and expected in text, text

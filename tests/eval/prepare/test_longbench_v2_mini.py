"""The longbench_v2_mini sample: reproducible, valid, labelled, and every answer re-derived from its context."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from eval.benchmarks.longbench_v2.sources import V2Row, load_rows
from tests.eval.prepare import make_longbench_v2_mini as mini

SAMPLE = Path(__file__).resolve().parents[3] / "eval" / "prepare" / "samples" / "longbench_v2_mini"


def rows() -> dict[str, V2Row]:
    return {row.id: row for row in load_rows(SAMPLE / "data.json").rows}


def choice(row: V2Row) -> str:
    return {"A": row.choice_a, "B": row.choice_b, "C": row.choice_c, "D": row.choice_d}[row.answer]


def test_committed_file_is_what_the_generator_writes() -> None:
    assert (SAMPLE / "data.json").read_bytes() == mini.render(mini.build_rows())


def test_readme_labels_it_and_records_its_sha256() -> None:
    readme = (SAMPLE / "README.md").read_text(encoding="utf-8")
    digest = hashlib.sha256((SAMPLE / "data.json").read_bytes()).hexdigest()
    assert f"SHA-256 of `data.json`: `{digest}`" in readme
    assert "NOT LongBench data" in readme


def test_six_labelled_rows_covering_every_bucket() -> None:
    sample = rows()
    assert list(sample) == [f"lbv2mini-000{k}" for k in range(1, 7)]
    assert {r.difficulty for r in sample.values()} == {"easy", "hard"}
    assert {r.length for r in sample.values()} == {"short", "medium", "long"}
    assert all(3000 <= len(r.context.split()) <= 5000 for r in sample.values())
    assert all(len({r.choice_a, r.choice_b, r.choice_c, r.choice_d}) == 4 for r in sample.values())


def first_keeper(context: str) -> str:
    match = re.search(r"its first keeper was (\w+ \w+)", context)
    assert match
    return match.group(1)


def late_fee_of_ten(context: str) -> str:
    """Run the repository's constants and late_fee (import line dropped) and call late_fee(10)."""
    constants = context.split("### File: tollgate/constants.py")[1].split("### File:")[0]
    billing = context.split("### File: tollgate/billing.py")[1].split("### File:")[0]
    namespace: dict[str, object] = {}
    exec(constants + "\n" + billing.replace("from tollgate.constants import", "# "), namespace)
    function = namespace["late_fee"]
    assert callable(function)
    return str(function(10))


def fair_place(context: str) -> str:
    places = re.findall(r"The autumn fair will be held in the (\w+ \w+)\.", context)
    assert len(places) == 1
    return f"In the {places[0]}"


def most_plovers(context: str) -> str:
    counts = {
        site: int(n) for site, n in re.findall(r"At (\w+ \w+) the team counted (\d+) grey plovers", context)
    }
    assert len(counts) == 3
    return str(max(counts, key=lambda site: counts[site]))


def kettle_shelf(context: str) -> str:
    found = re.findall(r"^\| QX-7781 \| copper kettle \| (Shelf \d+) \|", context, flags=re.MULTILINE)
    assert len(found) == 1
    return str(found[0])


def darun_vel(context: str) -> str:
    """Translate by the stated rule: the modifier follows its head, so 'darun vel' = '<vel> <darun>'."""
    assert "Ossic places every modifier after the word it modifies" in context
    gloss = dict(re.findall(r"^(\w+) — (\w+) \(", context, flags=re.MULTILINE))
    return f"{gloss['vel']} {gloss['darun']}"


DERIVATIONS: list[tuple[str, Callable[[str], str], str]] = [
    # (id, what reads the answer out of the context, what it must find: worked out by hand from the key passages)
    ("lbv2mini-0001", first_keeper, "Ilse Varden"),
    ("lbv2mini-0002", late_fee_of_ten, "28"),  # 4 + (10 - 2) * 3
    ("lbv2mini-0003", fair_place, "In the east meadow"),
    ("lbv2mini-0004", most_plovers, "Cray Hollow"),  # 57 > 41 > 29, none at Wren Flats
    ("lbv2mini-0005", kettle_shelf, "Shelf 23"),
    ("lbv2mini-0006", darun_vel, "stone bridge"),  # darun = bridge (head), vel = stone (modifier)
]


@pytest.mark.parametrize(("item_id", "derive", "expected"), DERIVATIONS, ids=[d[0] for d in DERIVATIONS])
def test_answer_follows_from_the_context(item_id: str, derive: Callable[[str], str], expected: str) -> None:
    row = rows()[item_id]
    assert derive(row.context) == expected
    assert choice(row).startswith(expected)
    others = [c for c in (row.choice_a, row.choice_b, row.choice_c, row.choice_d) if c != choice(row)]
    assert not any(c.startswith(expected) for c in others)

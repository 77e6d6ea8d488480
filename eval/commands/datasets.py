"""`lbeval datasets`: every loaded benchmark's datasets with metric, output limit and chat/raw mode, in registry
order; what each lists (its rows, the lines under them, its `--json` entries' own keys) is its entry in
eval/benchmark_registry.LISTING, so this command names no benchmark."""

from __future__ import annotations

import argparse
import json

from eval.benchmark_registry import LISTING, REGISTRY, BenchmarkRegistry, ListedDataset, Listing
from eval.terminal import echo

HELP = (
    "List every benchmark's datasets with their metric, official output limit and chat/raw mode, and a "
    "benchmark's modes."
)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    echo(listing_json() if args.json else "\n".join(listing_lines()))
    return 0


def listings(registry: BenchmarkRegistry = REGISTRY) -> list[Listing]:
    """Each loaded benchmark's listing, in registry order (a benchmark without one left out)."""
    return [make() for make in registry.entries(LISTING).values()]


def listing_lines(registry: BenchmarkRegistry = REGISTRY) -> list[str]:
    """The table: one header, then each benchmark's rows and the lines under them, a blank line between two."""
    lines = [f"{'dataset':<22} {'metric':<15} {'max_tokens':>10}  {'mode':<5} lang"]
    for i, listing in enumerate(listings(registry)):
        lines += [""] if i else []
        lines += [table_row(d) for d in listing.datasets]
        lines += listing.notes
    return lines


def table_row(d: ListedDataset) -> str:
    row = f"{d.dataset:<22} {d.metric:<15} {d.max_tokens:>10}  {d.mode:<5} {d.language}"
    return f"{row}  {d.label}" if d.label else row


def listing_json(registry: BenchmarkRegistry = REGISTRY) -> str:
    """`--json`: one entry per dataset of every benchmark, in table order, each with its benchmark's own keys."""
    return json.dumps([json_entry(d) for listing in listings(registry) for d in listing.datasets], indent=2)


def json_entry(d: ListedDataset) -> dict[str, object]:
    """A dataset's `--json` entry: the table's fields, then its benchmark's own keys (one of the table's taken
    again is refused, ValueError in one line: an lbeval bug)."""
    entry: dict[str, object] = {
        "dataset": d.dataset, "metric": d.metric, "max_tokens": d.max_tokens, "mode": d.mode,
        "language": d.language, "first_line_only": d.first_line_only,
    }  # fmt: skip
    taken = sorted(entry.keys() & d.json_extra.keys())
    if taken:
        raise ValueError(f"dataset {d.dataset!r}: its own --json keys {', '.join(taken)} are every dataset's")
    return {**entry, **d.json_extra}

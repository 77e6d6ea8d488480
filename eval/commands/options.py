"""Options several commands share, defined once: `--specs` (launch spec files)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_specs_option(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--specs FILE` (repeatable): TOML files of `[variants.NAME]` launch specs, on top of the shipped ones."""
    p.add_argument(
        "--specs",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a TOML file of [variants.NAME] launch specs, on top of the shipped ones (repeatable)",
    )

"""`lbeval longbench-eval PRED_DIR [--e]`: drop-in for LongBench's official eval.py.

Reads every `<dataset>.jsonl` in PRED_DIR (official prediction format: pred, answers, all_classes, length),
writes PRED_DIR/result.json with the official keys and numbers, prints a table. The logic lives in
`scorers.longbench.dropin`; this module parses arguments and turns its errors into `DataError`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eval.errors import DataError
from eval.terminal import echo
from scorers.longbench import PredictionFileError, evaluate_folder, format_table, write_result

HELP = "drop-in for LongBench's eval.py: score PRED_DIR/<dataset>.jsonl files, write PRED_DIR/result.json"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pred_dir", type=Path, metavar="PRED_DIR", help="folder of <dataset>.jsonl predictions"
    )
    parser.add_argument(
        "--e",
        action="store_true",
        help="LongBench-E: scores per length bucket 0-4k, 4-8k, 8k+ (needs `length`)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="scoring processes (default: one per CPU for large folders; results are identical for any N)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        result = evaluate_folder(args.pred_dir, args.e, workers=args.workers)
    except PredictionFileError as exc:
        raise DataError(exc.path, exc.line, exc.field, exc.message) from None
    out = write_result(args.pred_dir, result)
    echo(format_table(result))
    echo(f"wrote {out}")
    return 0

"""`lbeval longbench-eval PRED_DIR [--e]`: drop-in for LongBench's official eval.py.

Reads every `<dataset>.jsonl` in PRED_DIR (official prediction format: pred, answers, all_classes, length),
writes PRED_DIR/result.json with the official keys and numbers, prints a table. The logic lives in
`scorers.longbench.dropin`; this module parses arguments and turns its errors into `DataError`.

`lbeval longbench-eval --v2 PRED_DIR [--compensated] [--data data.json]`: drop-in for LongBench v2's result.py
(scorers.longbench_v2.dropin): every `*.jsonl` / `*.json` file pred.py wrote in PRED_DIR is one row of
PRED_DIR/result.txt (Model, Overall, Easy, Hard, Short, Medium, Long, as result.py writes it, printed too);
`--compensated` scores an unextractable answer 0.25 (result.py's `compensated = True`); `--data` (the v2
data.json the predictions were made from) also prints lbeval's figures, where an item with no line counts wrong.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eval.atomic import atomic_write
from eval.errors import DataError, UsageError
from eval.terminal import echo
from scorers import longbench_v2
from scorers.longbench import PredictionFileError, evaluate_folder, format_table, write_result
from scorers.longbench_v2.dropin import RESULT_FILE as V2_RESULT_FILE

HELP = (
    "drop-in for LongBench's eval.py: score PRED_DIR/<dataset>.jsonl files, write PRED_DIR/result.json "
    "(--v2: LongBench v2's result.py, PRED_DIR/result.txt)"
)


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
    v2 = parser.add_argument_group("LongBench v2 (the official result.py)")
    v2.add_argument(
        "--v2",
        action="store_true",
        help="PRED_DIR holds LongBench v2 pred.py files; write PRED_DIR/result.txt",
    )
    v2.add_argument("--compensated", action="store_true", help="--v2: an unextractable answer scores 0.25")
    v2.add_argument(
        "--data", type=Path, metavar="DATA_JSON", help="--v2: the data.json; also print lbeval's figures"
    )


def run(args: argparse.Namespace) -> int:
    if args.v2:
        return run_v2(args)
    if args.compensated or args.data is not None:
        raise UsageError("--compensated and --data are LongBench v2 options: add --v2")
    try:
        result = evaluate_folder(args.pred_dir, args.e, workers=args.workers)
    except PredictionFileError as exc:
        raise DataError(exc.path, exc.line, exc.field, exc.message) from None
    out = write_result(args.pred_dir, result)
    echo(format_table(result))
    echo(f"wrote {out}")
    return 0


def run_v2(args: argparse.Namespace) -> int:
    """result.py's drop-in: result.txt in PRED_DIR, printed; with --data, lbeval's figures after it."""
    if args.e:
        raise UsageError(
            "--e is LongBench v1's (LongBench-E); LongBench v2 has no length buckets of that kind"
        )
    try:
        expected = longbench_v2.read_expected(args.data) if args.data is not None else None
        results = longbench_v2.evaluate_folder(args.pred_dir, compensated=args.compensated, expected=expected)
    except longbench_v2.PredictionFileError as exc:
        raise DataError(exc.path, exc.line, exc.field, _where(exc) + exc.message) from None
    text = longbench_v2.format_result(results)
    out = args.pred_dir / V2_RESULT_FILE
    atomic_write(out, text)
    echo(text)
    if expected is not None:
        echo("")
        echo("lbeval (every data item counts; Dropped = no line in the file, counted wrong):")
        echo(longbench_v2.format_lbeval(results))
    echo(f"wrote {out}")
    return 0


def _where(exc: longbench_v2.PredictionFileError) -> str:
    """A JSON array file's element (DataError names the file, line and field)."""
    return f"element {exc.element}: " if exc.element is not None else ""

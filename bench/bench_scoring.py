"""Scoring throughput of `lbeval longbench-eval` on a synthetic full-size LongBench v1 prediction set.

The set has LongBench v1's row counts (LongBench/task.md: 200 per dataset, except multifieldqa_en 150 and
lcc / repobench-p 500 each: 4,750 rows), generated with a seeded RNG: English from a Zipf-like vocabulary,
Chinese from jieba's own dictionary (by frequency), predictions that partly copy their references, summary
predictions of 300-700 words (vcsum: 300-700 jieba words, no ASCII '.', so some pairs cross the official
recursion budget, as real vcsum outputs do). `evaluate_folder` runs in a fresh subprocess (interpreter,
imports and jieba's dictionary load included in the wall time), once with the default worker processes and
once with one process; each prints rows/s, seconds and peak RSS (ru_maxrss of the process and of its
largest worker). Then a sample of summary rows is scored with the official `rouge` package (a dev
dependency) to check the numbers are identical and to extrapolate the official scorer's time.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import smoke

SEED = 20260909
ROWS = {name: 200 for name in (
    "narrativeqa", "qasper", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique", "dureader", "gov_report",
    "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht", "passage_count",
    "passage_retrieval_en", "passage_retrieval_zh",
)} | {"multifieldqa_en": 150, "lcc": 500, "repobench-p": 500}  # fmt: skip
SUMMARY_WORDS = {"gov_report": (300, 700), "multi_news": (300, 700), "qmsum": (300, 700), "vcsum": (300, 700)}
REFERENCE_WORDS = {
    "gov_report": (400, 800),
    "multi_news": (200, 450),
    "qmsum": (60, 150),
    "vcsum": (150, 450),
}
TREC = [f"Class {c}" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"] + ["Other", "Other location", "Location", "Date"]
LSHT = ["农业、农村", "农业", "体育", "体育竞技", "经济", "文化", "科技", "教育", "军事", "社会"]


class Text:
    """Seeded word sources: English pseudo-words (Zipf-like) and jieba dictionary words (by frequency)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        syllables = ["ka", "ro", "mi", "ten", "sa", "lu", "de", "vo", "ni", "par", "es", "tor", "al", "in"]
        words = {"".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(5000)}
        self.en = ["the", "of", "and", "to", "a", "in", "for", "is", "on", "that"] + sorted(words)
        self.en_weights = [1.0 / (rank + 1) for rank in range(len(self.en))]
        import jieba

        entries = (
            line.split(" ")
            for line in Path(jieba.__file__).with_name("dict.txt").read_text("utf-8").splitlines()
        )
        top = sorted(((int(f), w) for w, f, *_ in entries), reverse=True)[:20000]
        self.zh = [w for _, w in top]
        self.zh_weights = [float(f) for f, _ in top]

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.en, weights=self.en_weights, k=n)

    def english(self, n: int) -> str:
        """n words in sentences of 8-30 words, each ending with '.'."""
        out, left = [], n
        while left > 0:
            k = min(left, self.rng.randint(8, 30))
            out.append(" ".join(self.words(k)).capitalize() + ".")
            left -= k
        return " ".join(out)

    def chinese(self, n: int) -> str:
        words = self.rng.choices(self.zh, weights=self.zh_weights, k=n)
        return "".join(
            w + ("，" if self.rng.random() < 0.05 else "。" if self.rng.random() < 0.03 else "")
            for w in words
        )

    def mutate(self, text: str, keep: float) -> str:
        """A prediction that keeps a share of the reference's words in order and replaces the rest."""
        tokens = list(text) if not text.isascii() else text.split(" ")
        fresh = self.chinese(len(tokens)) if not text.isascii() else " ".join(self.words(len(tokens)))
        fresh_tokens = list(fresh) if not text.isascii() else fresh.split(" ")
        mixed = [
            t if self.rng.random() < keep else fresh_tokens[i % len(fresh_tokens)]
            for i, t in enumerate(tokens)
        ]
        return ("" if not text.isascii() else " ").join(mixed)


def example(name: str, t: Text) -> dict[str, Any]:
    rng = t.rng
    classes: list[str] | None = None
    if name in SUMMARY_WORDS:
        ref_n = rng.randint(*REFERENCE_WORDS[name])
        pred_n = rng.randint(*SUMMARY_WORDS[name])
        if name == "vcsum":
            answers = [t.chinese(ref_n)]
            pred = t.mutate(answers[0], 0.3)[: pred_n * 2] + t.chinese(max(0, pred_n - ref_n))
        else:
            answers = [t.english(ref_n)]
            pred = t.mutate(answers[0], 0.35) + " " + t.english(max(0, pred_n - ref_n))
    elif name == "dureader":
        answers = [t.chinese(rng.randint(40, 150))]
        pred = t.mutate(answers[0], 0.4)
    elif name == "samsum":
        answers = [t.english(rng.randint(15, 40))]
        pred = t.mutate(answers[0], 0.4) + "\n" + t.english(20)
    elif name == "multifieldqa_zh":
        answers = [t.chinese(rng.randint(3, 20))]
        pred = t.mutate(answers[0], 0.5) + t.chinese(rng.randint(0, 30))
    elif name in ("trec", "lsht"):
        classes = TREC if name == "trec" else LSHT
        answers = [rng.choice(classes)]
        pred = rng.choice(classes) + "\n" + rng.choice(classes)
    elif name in ("passage_retrieval_en", "passage_retrieval_zh", "passage_count"):
        label = {
            "passage_retrieval_en": "Paragraph {}",
            "passage_retrieval_zh": "段落{}",
            "passage_count": "{}",
        }[name]
        answers = [label.format(rng.randint(1, 30))]
        pred = " ".join(label.format(rng.randint(1, 30)) for _ in range(rng.randint(1, 2)))
    elif name in ("lcc", "repobench-p"):
        answers = [" ".join(t.words(rng.randint(3, 12)))]
        pred = "\n".join(["# " + " ".join(t.words(4)), t.mutate(answers[0], 0.6), " ".join(t.words(6))])
    else:  # English QA
        answers = [
            " ".join(t.words(rng.randint(1, 8)))
            for _ in range(rng.randint(1, 10 if name == "triviaqa" else 3))
        ]
        pred = t.mutate(answers[0], 0.6) + " " + " ".join(t.words(rng.randint(0, 40)))
    return {"pred": pred, "answers": answers, "all_classes": classes, "length": rng.randint(500, 20000)}


def generate(folder: Path, seed: int = SEED, rows: dict[str, int] | None = None) -> int:
    t = Text(random.Random(seed))
    sizes = ROWS if rows is None else rows
    for name, n in sizes.items():
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for _ in range(n):
                handle.write(json.dumps(example(name, t), ensure_ascii=False) + "\n")
    return sum(sizes.values())


def child(folder: str, workers: str) -> None:
    """Runs in the measured subprocess: score the folder, print seconds, peak RSS and the result."""
    start = time.perf_counter()
    from scorers.longbench import evaluate_folder

    result = evaluate_folder(Path(folder), False, workers=None if workers == "auto" else int(workers))
    seconds = time.perf_counter() - start
    me, workers_usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + workers_usage.ru_utime + workers_usage.ru_stime
    report = {
        "seconds": seconds,
        "cpu": cpu,
        "self_mb": me.ru_maxrss / 1024,
        "worker_mb": workers_usage.ru_maxrss / 1024,
    }
    print(json.dumps({**report, "result": result}))


def measure(folder: Path, workers: str) -> dict[str, Any]:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_scoring", "--child", str(folder), workers],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    report: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    report["wall"] = time.perf_counter() - start
    return report


def official_sample(folder: Path, per_dataset: int = 6) -> None:
    """Score a few summary rows with the `rouge` package: identical numbers? official time per row?"""
    try:
        from rouge import Rouge
    except ImportError:  # pragma: no cover - only the dev extra installs it
        print("scoring: official `rouge` package not installed; skipped the identical-numbers sample")
        return
    from scorers.longbench import score_example

    same, rows, seconds = 0, 0, 0.0
    for name in ("gov_report", "multi_news", "qmsum"):
        lines = (folder / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:per_dataset]
        for line in lines:
            row = json.loads(line)
            start = time.perf_counter()
            try:
                official = Rouge().get_scores([row["pred"]], [row["answers"][0]], avg=True)["rouge-l"]["f"]
            except Exception:  # the official metric's bare except
                official = 0.0
            seconds += time.perf_counter() - start
            rows += 1
            same += max(0.0, official) == score_example(name, row["pred"], row["answers"], None)
    summary_rows = sum(ROWS[n] for n in ("gov_report", "multi_news", "qmsum", "vcsum", "samsum", "dureader"))
    print(f"scoring: official rouge package on {rows} English summary rows: {seconds / rows:.3f} s/row "
          f"(about {seconds / rows * summary_rows / 60:.1f} min for the set's {summary_rows} rouge rows); "
          f"identical floats on {same}/{rows}")  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lbeval-bench-") as tmp:
        folder = Path(tmp)
        rows = generate(folder, rows={name: 2 for name in ROWS} if smoke() else None)
        runs = {workers: measure(folder, workers) for workers in ("auto", "1")}
        for workers, r in runs.items():
            label = f"{os.cpu_count()} CPUs, auto workers" if workers == "auto" else "1 process"
            print(f"scoring: {rows} rows in {r['seconds']:.2f} s = {rows / r['seconds']:.0f} rows/s ({label}; "
                  f"{r['cpu']:.2f} CPU s; {r['wall']:.2f} s wall incl. interpreter start), peak RSS "
                  f"{r['self_mb']:.0f} MB + largest worker {r['worker_mb']:.0f} MB")  # fmt: skip
        if json.dumps(runs["auto"]["result"]) != json.dumps(runs["1"]["result"]):
            print("scoring: MISMATCH between worker counts")
        official_sample(folder, 1 if smoke() else 6)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()

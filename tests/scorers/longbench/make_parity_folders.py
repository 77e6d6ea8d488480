"""Write the parity folders under tests/data/scorers/ (run by hand: `python -m tests.scorers.longbench.make_parity_folders`).

Small made-up LongBench-format prediction files for all 21 datasets (`parity_plain/`) and for the 13
LongBench-E datasets with lengths in every bucket (`parity_e/`), hand-written quirk cases plus seeded random
rows, and each folder's `expected_result.json`, derived with the test-only reference implementation
(`reference_eval.py`: the `rouge` package, fuzzywuzzy, jieba), never with lbeval's own code.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.scorers.longbench import reference_eval

DATA = Path(__file__).resolve().parents[2] / "data" / "scorers"

EN_WORDS = [
    "the",
    "a",
    "an",
    "report",
    "council",
    "budget",
    "meeting",
    "project",
    "said",
    "will",
    "year",
    "plan",
    "city",
    "water",
    "school",
    "health",
    "data",
    "model",
    "team",
    "market",
    "price",
    "growth",
    "policy",
    "members",
    "agreed",
    "committee",
    "review",
    "new",
    "funding",
    "local",
    "state",
    "national",
]
ZH_WORDS = [
    "会议",
    "讨论",
    "了",
    "项目",
    "进度",
    "和",
    "预算",
    "安排",
    "我们",
    "需要",
    "提高",
    "效率",
    "公司",
    "市场",
    "产品",
    "用户",
    "数据",
    "分析",
    "北京",
    "上海",
    "经济",
    "发展",
]
ZH_OTHER = [
    "天气",
    "晴朗",
    "春天",
    "花朵",
    "河流",
    "山脉",
    "森林",
    "音乐",
    "电影",
    "小说",
    "诗歌",
    "绘画",
    "足球",
    "篮球",
    "跑步",
    "游泳",
    "咖啡",
    "茶叶",
    "面包",
    "米饭",
]
TREC = [
    "Abbreviation",
    "Animal",
    "Date",
    "Other",
    "Other location",
    "Location",
    "City",
    "Country",
    "Number of something",
]
LSHT = ["农业、农村", "农业", "体育", "体育竞技", "经济", "文化"]


def sentences(rng: random.Random, words: list[str], n_sent: int, lo: int = 4, hi: int = 14) -> str:
    return " ".join(
        " ".join(rng.choices(words, k=rng.randint(lo, hi))).capitalize() + "." for _ in range(n_sent)
    )


def zh_text(rng: random.Random, words: list[str], n: int, period: str = "。") -> str:
    return "".join(w + (period if rng.random() < 0.1 else "") for w in rng.choices(words, k=n))


def row(
    pred: str, answers: list[str], classes: list[str] | None = None, length: int = 5000
) -> dict[str, Any]:
    return {"pred": pred, "answers": answers, "all_classes": classes, "length": length}


def qa_rows(rng: random.Random) -> list[dict[str, Any]]:
    rows = [
        row("The cat sat on the mat.", ["a cat sat on a mat"]),
        row("Paris, France", ["Paris", "City of Paris"]),
        row("the", ["the"]),
        row("", ["anything"]),
        row("theory of the case", ["Theory"]),
        row("A-B testing; results: positive!", ["ab testing results"]),
        row("x x y", ["x y y"]),
    ]
    for _ in range(6):
        rows.append(
            row(
                " ".join(rng.choices(EN_WORDS, k=rng.randint(1, 12))),
                [" ".join(rng.choices(EN_WORDS, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 3))],
            )
        )
    return rows


def rouge_rows(rng: random.Random) -> list[dict[str, Any]]:
    rows = [
        row("", ["A reference summary."]),
        row("...", ["A reference summary."]),
        row(" ", [" "]),
        row("a. ", ["a"]),
        row("The meeting ended. The budget was approved", ["The budget was approved. The meeting ended."]),
        row("3.5 percent growth", ["3 5 percent growth"]),
        row("b a. a", ["b a"]),
        # One long '.'-free pair: the package's recursive walk needs ~1,500 calls, beyond any stack.
        row(
            "report " + " ".join(f"h{i % 700}" for i in range(800)),
            ["report " + " ".join(f"r{i}" for i in range(700))],
        ),
    ]
    for _ in range(8):
        pred = sentences(rng, EN_WORDS, rng.randint(1, 6))
        rows.append(
            row(pred, [sentences(rng, EN_WORDS, rng.randint(1, 6)) for _ in range(rng.randint(1, 2))])
        )
    return rows


def zh_rouge_rows(rng: random.Random) -> list[dict[str, Any]]:
    rows = [
        row("", ["会议讨论了项目进度。"]),
        row("会议讨论了项目进度和预算安排", ["会议讨论了预算安排"]),
        row("增长3.5个百分点", ["增长了3.5个百分点"]),
        # ~1,600 jieba tokens with no '.', few in common: the official scorer crashes into 0.0 at any depth.
        row(
            "会议" + "".join(rng.choices(ZH_WORDS[1:], k=800)),
            ["会议" + "".join(rng.choices(ZH_OTHER, k=800))],
        ),
    ]
    for _ in range(6):
        rows.append(
            row(zh_text(rng, ZH_WORDS, rng.randint(5, 60)), [zh_text(rng, ZH_WORDS, rng.randint(5, 60))])
        )
    return rows


def zh_qa_rows(rng: random.Random) -> list[dict[str, Any]]:
    rows = [
        row("北京。", ["北京"]),
        row("《北京》", ["北京"]),
        row("我爱北京", ["北京", "天安门"]),
        row("ＡＢＣ公司", ["abc公司"]),
        row("", ["北京"]),
    ]
    for _ in range(5):
        rows.append(
            row(zh_text(rng, ZH_WORDS, rng.randint(1, 10), "，"), [zh_text(rng, ZH_WORDS, rng.randint(1, 5))])
        )
    return rows


def classification_rows(
    rng: random.Random, classes: list[str], cases: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    rows = [row(pred, [ref], classes) for pred, ref in cases]
    for _ in range(6):
        pred = (
            "\n" * rng.randint(0, 2)
            + " ".join(rng.sample(classes, rng.randint(0, 3)))
            + "\n"
            + rng.choice(classes)
        )
        rows.append(row(pred, [rng.choice(classes)], classes))
    return rows


TREC_CASES = [
    ("Other location", "Other location"),  # "Other" and "Location" are substrings; removal skips one of them
    ("Location", "Location"),
    ("\n\nCity\nCountry", "City"),
    ("Country\nCity", "City"),
    ("Number of something", "Other"),
    ("Date Animal", "Animal"),
]
LSHT_CASES = [
    ("农业、农村", "农业、农村"),
    ("体育竞技", "体育竞技"),
    ("经济和文化", "文化"),
    ("\n体育\n农业", "农业"),
]


def retrieval_rows(rng: random.Random, word: str, zh: bool) -> list[dict[str, Any]]:
    label = "段落{}" if zh else "Paragraph {}"
    rows = [
        row(label.format(3), [label.format(3)]),
        row(f"{label.format(3)} and {label.format(13)}", [label.format(3)]),
        row("no number here", [label.format(3)]),
        row("３", [label.format(3)]),
        row(f"The answer is {label.format(30)}, not 3", [label.format(3)]),
    ]
    for _ in range(5):
        nums = " ".join(str(rng.randint(1, 30)) for _ in range(rng.randint(1, 3)))
        rows.append(row(f"{word} {nums}", [label.format(rng.randint(1, 30))]))
    return rows


def count_rows(rng: random.Random) -> list[dict[str, Any]]:
    rows = [row("There are 7 paragraphs", ["7"]), row("7 or 8", ["7"]), row("07", ["7"]), row("", ["7"])]
    rows += [
        row(" ".join(str(rng.randint(1, 12)) for _ in range(rng.randint(1, 3))), [str(rng.randint(1, 12))])
        for _ in range(5)
    ]
    return rows


def code_rows(rng: random.Random) -> list[dict[str, Any]]:
    rows = [
        row("```python\nx = compute(a, b)\n```", ["x = compute(a, b)"]),
        row("# a comment\n// another\n    return total", ["    return total;"]),
        row("x = 1  # set x\n", ["x = 1"]),
        row("\n\nfoo()", ["foo()"]),
        row("", [""]),
        row("abcdefgh", ["aijklmno"]),
        row("abcdefgh", ["abcijklm"]),
    ]
    tokens = ["self", "x", "=", "return", "(", ")", "data", "[i]", "+", "1", "foo", ".append"]
    for _ in range(5):
        rows.append(
            row(
                " ".join(rng.choices(tokens, k=rng.randint(1, 10))),
                [" ".join(rng.choices(tokens, k=rng.randint(1, 10)))],
            )
        )
    return rows


def plain_folder(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    files = {
        name: qa_rows(rng)
        for name in ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique")
    }
    files["triviaqa"] = [
        row("\n\nParis\nThe capital of France.", ["Paris"]),
        row("London\nParis", ["Paris"]),
    ] + qa_rows(rng)
    files["multifieldqa_zh"] = zh_qa_rows(rng)
    for name in ("gov_report", "qmsum", "multi_news"):
        files[name] = rouge_rows(rng)
    files["samsum"] = [row("\nJohn will come.\nMary will not.", ["John will come."])] + rouge_rows(rng)
    files["dureader"] = zh_rouge_rows(rng)
    files["vcsum"] = zh_rouge_rows(rng)
    files["trec"] = classification_rows(rng, TREC, TREC_CASES)
    files["lsht"] = classification_rows(rng, LSHT, LSHT_CASES)
    files["passage_retrieval_en"] = retrieval_rows(rng, "Paragraph", zh=False)
    files["passage_retrieval_zh"] = retrieval_rows(rng, "段落", zh=True)
    files["passage_count"] = count_rows(rng)
    files["lcc"] = code_rows(rng)
    files["repobench-p"] = code_rows(rng)
    return files


E_LENGTHS = [120, 3999, 4000, 5500, 7999, 8000, 12000, 31000]


def e_folder(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    plain = plain_folder(rng)
    files = {}
    for name in ("qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news", "trec", "triviaqa",
                 "samsum", "passage_retrieval_en", "lcc", "repobench-p"):  # fmt: skip
        files[name] = [{**r, "length": rng.choice(E_LENGTHS)} for r in plain[name]]
    # passage_count: no row of 8k+ or more, so that bucket is NaN, as numpy's mean of nothing is.
    files["passage_count"] = [{**r, "length": rng.choice(E_LENGTHS[:5])} for r in plain["passage_count"]]
    return files


def write_folder(folder: Path, files: dict[str, list[dict[str, Any]]], longbench_e: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in files.items():
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for r in rows:
                handle.write(json.dumps(r, ensure_ascii=False) + "\n")
    expected = reference_eval.evaluate(folder, longbench_e)
    with open(folder / "expected_result.json", "w", encoding="utf-8") as handle:
        json.dump(expected, handle, ensure_ascii=False, indent=4)


def main() -> None:
    write_folder(DATA / "parity_plain", plain_folder(random.Random(20260909)), longbench_e=False)
    write_folder(DATA / "parity_e", e_folder(random.Random(20260910)), longbench_e=True)


if __name__ == "__main__":
    main()

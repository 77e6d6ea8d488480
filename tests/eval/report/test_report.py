"""Reports: model output is inert in Markdown and HTML; the HTML is self-contained with plots and a drill-down."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.report.format import first_char_difference
from eval.report.html import delta_counts, highlighted
from eval.report.markdown import md_escape
from eval.report.svg import nice_ticks
from eval.report.write import write_reports
from tests.eval.runfactory import base_and_variant, write_run

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    "</td></tr></table><b>broken",
    "a | b | c",
    "`code` and ```fence```",
    "**bold** [link](javascript:alert(3)) ![img](http://example.com/x.png)",
    "line one\nline two\r\n| --- |",
    "&lt;already escaped&gt; & <!-- comment -->",
]

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "tr", "th", "td", "ul", "li",
    "div", "strong", "details", "summary", "pre", "mark", "svg", "text", "line", "circle", "rect",
    "section", "span",  # the verdict banner and the marks on failing rows
    "nav", "a",  # the table of contents (links within the page only: href="#...")
}  # fmt: skip


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.parametrize("text", HOSTILE)
def test_md_escape_is_inert(text: str) -> None:
    out = md_escape(text)
    assert "<" not in out and ">" not in out and "\n" not in out and "\r" not in out
    assert re.search(r"(?<!\\)[|`*\[\]!]", out) is None  # every Markdown control character is backslashed
    # reading the escapes back gives the text (newlines become spaces)
    back = re.sub(r"\\(.)", r"\1", out).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert back == text.replace("\r\n", " ").replace("\n", " ")


def _hostile_comparison(tmp_path: Path):  # type: ignore[no-untyped-def]
    texts = {}
    for i, ex in enumerate(["qas00", "qas01", "qas02", "qas03"]):
        texts[(ex, "warm", 0)] = f"answer {HOSTILE[2 * i]} end"
        texts[(ex, "repeat", 0)] = f"answer {HOSTILE[2 * i]} end"
        texts[(ex, "cold", 0)] = f"answer {HOSTILE[2 * i + 1]} end"
    base, variant = base_and_variant(tmp_path, texts=texts)
    base.variant = "main<b>"  # names reach the reports too (folder name is just a string here)
    runs = tmp_path / "runs"
    return compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))


def test_hostile_outputs_are_inert_in_html(tmp_path: Path) -> None:
    c = _hostile_comparison(tmp_path)
    _, _, html_path = write_reports(c, tmp_path / "out")
    html = html_path.read_text()
    parser = TagCollector()
    parser.feed(html)
    tags = {t for t, _ in parser.tags}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    attrs = [(t, a) for t, attrs in parser.tags for a, _ in attrs]
    assert not [x for x in attrs if x[1].startswith("on") or x[1] in ("src", "style", "xlink:href")]
    hrefs = [v for t, attrs in parser.tags for a, v in attrs if a == "href"]
    assert hrefs and all(v is not None and v.startswith("#") for v in hrefs)  # in-page anchors only
    assert "<script" not in html.lower() and "<img" not in html.lower()
    # the hostile text is there, as text: the parser gives it back verbatim
    text = "".join(parser.text)
    for hostile in HOSTILE:
        assert hostile.replace("\r\n", "\n") in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "main&lt;b&gt;" in html


def test_hostile_outputs_are_inert_in_markdown(tmp_path: Path) -> None:
    c = _hostile_comparison(tmp_path)
    md = write_reports(c, tmp_path / "out")[0].read_text()
    assert "<" not in md.replace("&lt;", "")  # no raw HTML at all
    assert not re.search(r"(?<!\\)`", md)  # no code span can open
    # every table keeps one cell count for every row (no output broke out of its cell)
    for block in md.split("\n\n"):
        rows = [ln for ln in block.splitlines() if ln.startswith("|")]
        assert len({len(re.split(r"(?<!\\)\|", r)) for r in rows}) <= 1, block
    assert "script&gt;alert(1)&lt;/script&gt;" in md and 'onerror="alert(2)"&gt;' in md


def test_html_is_self_contained_with_plots_and_drilldown(tmp_path: Path) -> None:
    base, variant = base_and_variant(
        tmp_path,
        texts={("qas01", "warm", 0): "the BLEU metric", ("qas01", "repeat", 0): "the BLEU metric"},
    )
    runs = tmp_path / "runs"
    c = compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))
    html = write_reports(c, tmp_path / "out")[2].read_text()
    assert not re.search(r"https?://", html)  # nothing to fetch
    # timing per input, one panel per dataset (qasper, gov_report); divergence positions; logprob deltas
    assert html.count("<svg") == 4
    assert "Per-input warm prefill, server (ms), qasper: " in html and "Where outputs diverge" in html
    assert "Per-input warm prefill, server (ms), gov_report: " in html
    # drill-down: one <details> per diverging example (qas01: variant cold/warm), both outputs shown,
    # the first differing word marked
    assert html.count("<details") == 1
    assert "<mark>score</mark>" in html and "<mark>metric</mark>" in html
    assert "first differing token #2" in html
    titles = ("1. Accuracy", "2. Agreement within", "3. Agreement between", "4. Timing", "5. Cache controls")
    for title in titles:
        assert title in html
    # agreement is split: within each variant (no blank cells), and base vs variant (its own table):
    # cold outputs identical, warm qas01 differs
    assert "<td>—</td>" not in html[html.index('<h2 id="agreement">') : html.index('<h2 id="timing">')]
    assert (
        '<tr id="cross-cross_cold_text"><td>base cold vs variant cold: outputs equal (text)</td><td>6/6</td></tr>'
        in html
    )
    assert (
        '<tr id="cross-cross_warm_text"><td>base warm vs variant warm: outputs equal (text)</td><td>5/6</td></tr>'
        in html
    )
    # the table of contents: every link has its anchor in the page
    anchors = re.findall(r'<a href="#([^"]+)">', html)
    assert anchors[:2] == ["verdict", "accuracy"] and anchors[-2:] == ["plots", "divergences"]
    assert all(f'id="{a}"' in html for a in anchors)


def test_highlight_and_first_difference() -> None:
    assert first_char_difference("the cat sat", "the car sat") == 6
    assert first_char_difference("abc", "abcdef") == 3
    assert highlighted("the cat sat", 6) == "the <mark>cat</mark> sat"
    assert highlighted("a <b>", 2) == "a <mark>&lt;b&gt;</mark>"
    assert highlighted("abc", 3) == "abc<mark>⟨end⟩</mark>"


def test_delta_bins_and_ticks() -> None:
    # bins: 0, <=1e-6, <=1e-5, <=1e-4, <=1e-3, <=0.01, <=0.1, <=1, >1
    assert delta_counts([0.0, 0.0, 5e-7, 2e-3, 0.5, 3.0, None]) == [2, 1, 0, 0, 0, 1, 0, 1, 1]
    assert nice_ticks(0, 73) == [0, 20, 40, 60, 80]
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_control_characters_in_outputs_are_visible_escapes_in_html_and_markdown(tmp_path: Path) -> None:
    escapes = "\x1b[2J\x1b]0;t\x07"
    texts = {("qas01", "warm", 0): f"the {escapes} metric", ("qas01", "repeat", 0): f"the {escapes} metric"}
    base, variant = base_and_variant(tmp_path, texts=texts)
    runs = tmp_path / "runs"
    c = compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))
    md_path, _, html_path = write_reports(c, tmp_path / "out")
    html, md = html_path.read_text(), md_path.read_text()
    for text in (html, md):
        assert re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text) == []
    assert (
        '<span class="ctl">\\x1b</span>[2J<span class="ctl">\\x1b</span>]0;t<span class="ctl">\\x07</span>'
        in html
    )
    assert md_escape(escapes) == "\\\\x1b\\[2J\\\\x1b\\]0;t\\\\x07"  # reads `\x1b[2J\x1b]0;t\x07` on GitHub


def test_bidi_controls_in_outputs_are_visible_escapes_in_html_and_markdown(tmp_path: Path) -> None:
    hostile = "ok \u202etxt.exe\u202c and \u2066isolated\u2069"
    texts = {("qas01", "warm", 0): hostile, ("qas01", "repeat", 0): hostile}
    base, variant = base_and_variant(tmp_path, texts=texts)
    runs = tmp_path / "runs"
    c = compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))
    md_path, _, html_path = write_reports(c, tmp_path / "out")
    html, md = html_path.read_text(), md_path.read_text()
    for text in (html, md):
        assert re.findall(r"[\u202a-\u202e\u2066-\u2069]", text) == []
    assert '<span class="ctl">\\u202e</span>txt.exe<span class="ctl">\\u202c</span>' in html
    assert '<span class="ctl">\\u2066</span>isolated<span class="ctl">\\u2069</span>' in html
    assert "\\\\u202etxt.exe" in md  # reads `\u202etxt.exe` on GitHub

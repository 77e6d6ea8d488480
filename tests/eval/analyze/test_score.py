"""lbeval score: official scores, agreement, timing and cache checks from run folders (eval.records.run_folder).

Expected values are computed by hand in the comments from the factory's definitions (tests/eval/runfactory.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.analyze.score import score_run
from eval.analyze.timing import t975
from eval.cli import main
from eval.errors import DataError, LbevalError
from eval.records.final import select_final
from eval.records.run_folder import resolve_run
from eval.records.types import RequestRecord
from eval.report.write import write_scores
from tests.eval.runfactory import RunSpec, base_and_variant, make_rows, token_id, write_inputs_file, write_run


def _run(tmp_path: Path, **kw: object) -> RunSpec:
    base, _ = base_and_variant(tmp_path)
    for k, v in kw.items():
        setattr(base, k, v)
    return base


def _acc(scored: object, dataset: str, pass_name: str) -> tuple[float | None, int, int]:
    acc = next(a for a in scored.scores.accuracy if a.dataset == dataset)  # type: ignore[attr-defined]
    ps = acc.passes[pass_name]
    return ps.score, ps.n_scored, ps.n_total


def test_clean_run_scores_every_pass(tmp_path: Path) -> None:
    s = score_run(write_run(tmp_path / "runs", _run(tmp_path)))
    # every output is the first reference answer: qa_f1 1.0 per example -> 100.0; ROUGE-L of a text with
    # itself: F = 2PR/(P+R+1e-8) = 2/(2+1e-8) -> round(100 * 0.99999999, 2) = 100.0
    for p in ("cold", "warm", "repeat"):
        assert _acc(s, "qasper", p) == (100.0, 4, 4)
        assert _acc(s, "gov_report", p) == (100.0, 2, 2)
    gov = next(a for a in s.scores.accuracy if a.dataset == "gov_report")
    assert gov.metric == "rouge" and gov.passes["cold"].rouge_l == 100.0
    qas = next(a for a in s.scores.accuracy if a.dataset == "qasper")
    assert qas.passes["cold"].rouge_l is None  # secondary column only for rouge datasets
    cw = s.scores.agreement["cold_warm"]
    assert cw is not None and (cw.text_equal, cw.tokens_equal, cw.n_total, cw.n_pairs) == (6, 6, 6, 6)
    assert cw.max_delta == 0.0 and cw.min_overlap == 3 and cw.divergences == []
    ft = s.scores.agreement["timing_first_token"]
    assert ft is not None and (ft.first_token_equal, ft.n_total) == (12, 12)  # 6 inputs x 2 repetitions
    assert (
        s.scores.errors == 0 and s.scores.invalid.warm_attempts == 0 and s.scores.invalid.cold_attempts == 0
    )
    assert all(c.ok == c.n_total for c in s.scores.cache)


def test_warm_divergence_is_scored_and_located(tmp_path: Path) -> None:
    spec = _run(
        tmp_path, texts={("qas01", "warm", 0): "the BLEU metric"}, margins={("qas01", "warm", 0): 0.02}
    )
    s = score_run(write_run(tmp_path / "runs", spec))
    # qas01 answer "the BLEU score": normalized tokens [bleu, score] vs [bleu, metric] -> F1 0.5;
    # warm qasper = round(100 * (1 + 0.5 + 1 + 1) / 4, 2) = 87.5
    assert _acc(s, "qasper", "warm") == (87.5, 4, 4)
    assert _acc(s, "qasper", "cold") == (100.0, 4, 4)
    cw = s.scores.agreement["cold_warm"]
    assert cw is not None and (cw.text_equal, cw.tokens_equal, cw.first_token_equal) == (5, 5, 6)
    [d] = cw.divergences
    # "the BLEU score" vs "the BLEU metric": word (= token) 2 differs; the warm side's margin is 0.02
    assert (d.dataset, d.example_id, d.position) == ("qasper", "qas01", 2)
    assert d.margin_a == pytest.approx(3.0) and d.margin_b == pytest.approx(0.02) and d.near_tie
    wr = s.scores.agreement["warm_repeat"]
    assert wr is not None and wr.text_equal == 5
    assert s.scores.unique.n_multiple == 1 and s.scores.unique.max_unique == 2


def test_logprob_delta_and_first_token_flip(tmp_path: Path) -> None:
    spec = _run(
        tmp_path,
        shifts={("qas00", "warm", 0): -0.25},  # same tokens, chosen logprob -0.05 vs -0.30
        texts={("gov01", "timing_warm", 1): "Officials"},  # first token differs in repetition 1
    )
    s = score_run(write_run(tmp_path / "runs", spec))
    cw = s.scores.agreement["cold_warm"]
    assert cw is not None and cw.text_equal == 6 and cw.max_delta == pytest.approx(0.25)
    ft = s.scores.agreement["timing_first_token"]
    assert ft is not None and (ft.first_token_equal, ft.n_total) == (11, 12)
    # the flipped first token shares no top-3 id with the original ("GAO" vs "Officials")
    assert token_id("GAO") != token_id("Officials") and ft.min_overlap == 0


def test_errors_invalid_and_missing_stay_in_the_denominators(tmp_path: Path) -> None:
    spec = _run(
        tmp_path,
        errors={("gov01", "cold", 0)},
        invalid={("qas02", "warm", 0): True, ("qas03", "warm", 0): False},  # recovered / still invalid
        missing={("qas00", "repeat", 0)},
        complete=False,
    )
    s = score_run(write_run(tmp_path / "runs", spec))
    assert _acc(s, "gov_report", "cold") == (100.0, 1, 2)
    assert _acc(s, "qasper", "warm") == (100.0, 3, 4)  # the still-invalid warm sample is never scored
    cw = s.scores.agreement["cold_warm"]
    assert cw is not None
    assert (cw.n_total, cw.n_pairs, cw.text_equal, cw.errors, cw.invalid, cw.missing) == (6, 4, 4, 1, 1, 0)
    wr = s.scores.agreement["warm_repeat"]
    assert wr is not None and (wr.n_total, wr.n_pairs, wr.invalid, wr.missing) == (6, 4, 1, 1)
    warm = next(c for c in s.scores.cache if c.pass_name == "warm")
    # attempts: qas02 invalid then ok, qas03 invalid twice -> 3 invalid attempts, 1 recovered, 5/6 hit
    assert (warm.invalid_attempts, warm.recovered, warm.ok, warm.n_total) == (3, 1, 5, 6)
    assert s.scores.errors == 1
    assert (s.scores.invalid.warm_attempts, s.scores.invalid.warm_recovered, s.scores.invalid.warm_final) == (
        3,
        1,
        1,
    )
    assert not s.scores.run.complete and any("incomplete" in w for w in s.scores.run.warnings)


def test_timing_per_input_and_means(tmp_path: Path) -> None:
    s = score_run(write_run(tmp_path / "runs", _run(tmp_path)))
    t = s.scores.timing
    first = t.per_input[0].measures["warm_prefill_ms"]
    # input 0, warm: prefill 0.050 + 0.001 * rep s -> 50 and 51 ms; SD 0.7071; t(1) = 12.706
    assert first is not None and first.n == 2
    assert (first.mean, first.min, first.max) == pytest.approx((50.5, 50.0, 51.0))
    assert first.sd == pytest.approx(0.70711, abs=1e-4)
    assert first.ci_high - first.mean == pytest.approx(12.706 * 0.70711 / 2**0.5, rel=1e-4)  # type: ignore[operator]
    # mean over inputs i = 0..5 of (50 + 10 i + 0.5) ms = 75.5; cold: 200 + 25 + 0.5 = 225.5
    assert t.means["warm_prefill_ms"] == pytest.approx(75.5)
    assert t.means["cold_prefill_ms"] == pytest.approx(225.5)
    assert t.means["warm_ttft_ms"] == pytest.approx(79.5)  # TTFT = prefill + 4 ms in the factory
    assert t.valid and t.flags == []


def test_timing_flags(tmp_path: Path) -> None:
    spec = _run(
        tmp_path, metrics=False, settings={"concurrency": 4}, invalid={("qas00", "timing_warm", 1): False}
    )
    t = score_run(write_run(tmp_path / "runs", spec)).scores.timing
    assert not t.valid and t.means["warm_prefill_ms"] is None
    assert "invalid: timing needs concurrency 1, the run used 4" in t.flags
    assert "1 timing sample(s) invalid (cache state not as required), left out" in t.flags
    assert "server prefill time unavailable (no /metrics histogram deltas)" in t.flags


def test_group_restart_supersedes_the_older_group() -> None:
    def rec(
        pass_name: str, group: int, attempt: int = 0, status: str = "ok", text: str = "x"
    ) -> RequestRecord:
        return RequestRecord(
            run_id="r", variant="v", dataset="qasper", example_id="a", pass_name=pass_name, repetition=0,
            attempt=attempt, seq=0, group=group, endpoint="chat", settings={}, cache_salt="s",
            prompt_sha256="p", status=status, output_text=text,
        )  # fmt: skip

    sel = select_final([
        rec("cold", 0, text="old"), rec("warm", 0, status="invalid"), rec("warm", 0, attempt=1, text="old"),
        rec("cold", 1, text="new"),  # the restart re-ran cold; its warm has no record yet
    ])  # fmt: skip
    assert sel.final[("qasper", "a", "cold", 0)].output_text == "new"
    assert (
        "qasper",
        "a",
        "warm",
        0,
    ) not in sel.final  # a warm of the old group never pairs with the new cold
    assert sel.superseded == 3 and sel.invalid_attempts == {}


def test_inputs_must_match_the_run(tmp_path: Path) -> None:
    spec = _run(tmp_path)
    run_dir = write_run(tmp_path / "runs", spec)
    write_inputs_file(spec.inputs_path, make_rows(n_qasper=3))
    with pytest.raises(
        DataError, match=r"inputs\.jsonl:sha256: inputs manifest has sha256 .* refusing to score"
    ):
        score_run(run_dir)
    spec.inputs_path.unlink()
    with pytest.raises(DataError, match="inputs_path: the run's inputs manifest .* was not found"):
        score_run(run_dir)


def test_score_command_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = write_run(tmp_path / "runs", _run(tmp_path))
    assert main(["score", "main", "--runs", str(tmp_path / "runs")]) == 0
    data = json.loads((run_dir / "scores.json").read_text())
    assert data["schema_version"] == 1 and data["n_inputs"] == 6
    assert data["agreement"]["cold_warm"]["text_equal"] == 6
    assert {e["id"]: e["scores"]["cold"] for e in data["examples"]}["qas00"] == 1.0
    md = (run_dir / "scores.md").read_text()
    assert "| qasper | qa\\_f1 | 100.00 | 100.00 | 100.00 | n/a |" in md
    assert "wrote" in capsys.readouterr().out


def test_resolve_run_picks_the_newest_manifest(tmp_path: Path) -> None:
    spec = _run(tmp_path)
    old = write_run(tmp_path / "runs", spec)
    spec.run_id, spec.started_at = "zz-older-name-but-newer", "2026-09-10T00:00:00Z"
    new = write_run(tmp_path / "runs", spec)
    assert resolve_run("main", tmp_path / "runs") == new
    (tmp_path / "runs" / "main" / "LATEST").write_text(old.name + "\n")  # what the runner writes
    assert resolve_run("main", tmp_path / "runs") == old
    assert resolve_run(str(old), tmp_path / "runs") == old
    with pytest.raises(LbevalError, match="no run of a variant named 'nope'"):
        resolve_run("nope", tmp_path / "runs")


def test_write_scores_round_trips(tmp_path: Path) -> None:
    scored = score_run(write_run(tmp_path / "runs", _run(tmp_path)))
    json_path, md_path = write_scores(scored)
    assert json.loads(json_path.read_text())["run"]["variant"] == "main"
    assert md_path.read_text().startswith("## lbeval scores: main run")


@pytest.mark.parametrize(
    ("df", "table"),
    [(1, 12.706), (4, 2.776), (12, 2.179), (13, 2.160), (20, 2.086), (30, 2.042), (120, 1.980)],
)
def test_t_quantiles_match_the_published_table(df: int, table: float) -> None:

    assert t975(df) == pytest.approx(table, abs=0.0015)

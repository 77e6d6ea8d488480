"""Adaptive timing repetitions (`lbeval ab --timing-until`, eval/run/adaptive.py) on the fake server: the session
adds paired timing repetitions until the confidence sequence's half-width, recomputed here from the records and
the pairing with the formula of scorers/sequential.py, is at most the target, or the budget is spent."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.analyze.timing import measure_ms
from eval.cli import main
from eval.gate.policy import load_policy
from eval.gate.settle import stop_check
from eval.records.ab_pairs import last_pairs, read_pairs
from eval.records.final import select_final
from eval.records.run_folder import RECORDS_NAME, read_manifest, scan_records
from eval.records.vocabulary import UNIT_TIMING
from eval.report.tables import build_tables
from eval.run.ab import AbConfig, execute_ab
from eval.run.adaptive import (
    Hooks,
    Look,
    TimingTarget,
    added_order,
    extend_timing,
    input_ratios,
    read_adaptive,
)
from eval.run.adaptive import (
    rounds as added_rounds,
)
from eval.run.config import endpoints
from eval.run.steps import Unit, timing_steps
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

N_INPUTS, REPS = 6, 2


def _config(server: FakeServer, tmp_path: Path, target: TimingTarget) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=60 + 20 * i) for i in range(N_INPUTS)])
    base = config_for(server, inputs, tmp_path / "runs", variant="aa", passes=("timing",), timing_reps=REPS)
    return AbConfig(base, replace(base, run_id=None), seed=5, quiet=True, timing_target=target)


def _noisy(server: FakeServer, sd: float) -> None:
    rng = random.Random(7)
    server.prefill_noise = lambda: rng.gauss(0.0, sd)


def _pairs_by_hand(da: Path, db: Path, pass_name: str = "timing_warm") -> tuple[list[float], list[str]]:
    """log(b/a) of the server prefill of `pass_name` of every adjacent timing pair in pairing order, and each
    one's input, read from the records."""
    recs = {d: {r.seq: r for r in scan_records(d / RECORDS_NAME).records} for d in (da, db)}
    out, inputs = [], []
    for p in last_pairs(read_pairs(da)).values():
        ra = [recs[da][s] for s in p.a.seqs if recs[da][s].pass_name == pass_name]
        rb = [recs[db][s] for s in p.b.seqs if recs[db][s].pass_name == pass_name]
        if p.adjacent and ra and rb:
            va = (ra[-1].server_metrics or {})["prefill_time_s"]
            vb = (rb[-1].server_metrics or {})["prefill_time_s"]
            out.append(math.log(vb / va))
            inputs.append(f"{p.dataset}/{p.example_id}")
    return out, inputs


def _ratios_by_hand(da: Path, db: Path) -> list[float]:
    return _pairs_by_hand(da, db)[0]


def _cs_by_hand(x: list[float], horizon: int) -> tuple[float, float]:
    """Waudby-Smith et al.'s asymptotic CS at t = len(x), alpha 0.05, rho2 for t* = horizon: (mean, radius)."""
    t = len(x)
    mean = sum(x) / t
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (t - 1))
    c = -2 * math.log(0.05)
    rho2 = (c + math.log(1 + c)) / horizon
    r = sd * math.sqrt(2 * (t * rho2 + 1) / (t * t * rho2) * math.log(math.sqrt(t * rho2 + 1) / 0.05))
    return mean, r


def _half_width(x: list[float], horizon: int) -> float:
    """The CS's half-width at t = len(x), in percent."""
    mean, r = _cs_by_hand(x, horizon)
    return 50 * (math.expm1(mean + r) - math.expm1(mean - r))


def test_adds_repetitions_until_the_half_width_is_reached(tmp_path: Path) -> None:
    with FakeServer() as server:
        _noisy(server, 0.15)
        da, db = execute_ab(_config(server, tmp_path, TimingTarget(8.0)))
    rec = read_adaptive(da)
    assert rec is not None and rec == read_adaptive(db)
    assert rec.stopped == "target" and rec.reps_planned == REPS and rec.reps_done > REPS
    (ratios, inputs), (cold, cold_inputs) = _pairs_by_hand(da, db), _pairs_by_hand(da, db, "timing_cold")
    assert rec.pairs == len(ratios) == len(cold) > N_INPUTS * REPS
    # it stopped at the first look (from the planned pairs on) where the warm and the cold sequence's and
    # gated interval's half-widths are all at or under the target, not later
    horizon = N_INPUTS * REPS

    def widest(t: int) -> float:
        return max(_half_width(ratios[:t], horizon), _half_width(cold[:t], horizon),
                   _yuen_half_width_by_hand(ratios[:t], inputs[:t]),
                   _yuen_half_width_by_hand(cold[:t], cold_inputs[:t]))  # fmt: skip

    # the phase looks after every AB/BA block of two pairs (timing-only units: one warm pair each)
    widths = [widest(t) for t in range(N_INPUTS * REPS, len(ratios) + 1, 2)]
    assert len(ratios) % 2 == 0 and widths[-1] <= 8.0 < min(widths[:-1])
    assert rec.half_width_pct == pytest.approx(_half_width(ratios, horizon))
    assert rec.cold_half_width_pct == pytest.approx(_half_width(cold, horizon))
    assert rec.cold_gated_half_width_pct == pytest.approx(
        _yuen_half_width_by_hand(cold, cold_inputs), rel=1e-4
    )
    # the added repetitions are ordinary timing records, paired in AB/BA blocks of two per input
    pairs = list(last_pairs(read_pairs(da)).values())
    for row in {p.example_id for p in pairs}:
        orders = {p.repetition: p.order for p in pairs if p.example_id == row}
        for r in range(0, max(orders), 2):  # passes=timing only: unit j = r, blocks (2k, 2k + 1)
            if r + 1 in orders:
                assert orders[r] != orders[r + 1]
    # ... sent input by input, each input's added repetitions of a round back to back (2 here: the planned 2
    # made even), so a disturbance of a few seconds lands on one input, not on one pair of every input
    added = [(p.example_id, p.repetition) for p in pairs if p.repetition >= REPS]
    for k in range(0, len(added) - 1, 2):
        (row, rep), (row_next, rep_next) = added[k], added[k + 1]
        assert row == row_next and rep % 2 == 0 and rep_next == rep + 1
    assert len({row for row, _ in added[: 2 * N_INPUTS]}) == min(N_INPUTS, len(added) // 2)
    sel = select_final(scan_records(da / RECORDS_NAME).records)
    assert not sel.duplicates and max(s.repetition for s in sel.final) == rec.reps_done - 1
    assert read_manifest(da).complete and read_manifest(db).complete
    # compare counts every adjacent pair, the added ones included
    c = compare(score_run(da), score_run(db))
    assert c.paired is not None and c.paired.measures["warm_prefill_ms"].n_pairs == len(ratios)
    # the report says how many repetitions it took and why it stopped
    assert c.paired.adaptive == rec
    table = next(t for t in build_tables(c) if t.id == "paired_timing")
    assert (
        f"{rec.pairs} timing pairs, up to {rec.reps_done} repetitions per input (planned {REPS})"
        in table.reading
        and "half-width" in table.reading
    )


def test_budget_stops_it_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer() as server:
        _noisy(server, 0.5)
        da, db = execute_ab(_config(server, tmp_path, TimingTarget(1.0, budget_s=1e-6)))
    rec = read_adaptive(da)
    assert rec is not None and rec.stopped == "budget" and "budget" in rec.reason
    # the budget counts the whole session: the planned repetitions already spent it, so none was added
    assert rec.reps_done == REPS and rec.pairs == N_INPUTS * REPS and rec.spent_s > 1e-6
    # the gate's advice names what stopped it: the budget, not the target (a smaller --timing-until would stop
    # at the same place)
    capsys.readouterr()
    main(["gate", str(da), str(db)])
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "re-run with a larger --timing-budget" in out and "--timing-budget of 1e-06 server-seconds" in out
    ), out
    assert "re-run with --timing-until" not in out


def test_resume_continues_the_added_repetitions(tmp_path: Path) -> None:
    calls: list[tuple[str, tuple[int, str, int]]] = []

    def interrupt(side: str, unit: tuple[int, str, int]) -> None:
        calls.append((side, unit))
        if unit[2] >= REPS + 1 and len([c for c in calls if c[1][2] >= REPS + 1]) == 3:
            raise KeyboardInterrupt  # inside the second added round

    with FakeServer() as server:
        _noisy(server, 0.15)
        config = _config(server, tmp_path, TimingTarget(8.0))
        with pytest.raises(KeyboardInterrupt):
            execute_ab(config, between=interrupt)
        # killed inside the second added round: the record written before the round counts it, so the
        # round's records are in the plan (no damage), and it says the round was running
        first_dir = next((tmp_path / "runs" / "aa").iterdir())
        running = read_adaptive(first_dir)
        assert running is not None and running.stopped == "running" and running.reps_done == REPS + 2
        info = score_run(first_dir).scores.run
        assert not any("plan does not name" in w or "damaged" in w for w in info.warnings)
        da, db = execute_ab(config)
    rec = read_adaptive(da)
    assert rec is not None and rec.stopped == "target"
    for d in (da, db):
        sel = select_final(scan_records(d / RECORDS_NAME).records)
        assert not sel.duplicates
    assert rec.pairs == len(_ratios_by_hand(da, db))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--timing-budget", "60"], "--timing-budget is for --timing-until"),
        (["--timing-until", "0"], "--timing-until 0: a half-width in percent"),
        (["--timing-until", "10", "--timing-budget", "-1"], "--timing-budget -1: server-seconds"),
        (["--timing-until", "10", "--passes", "cold,warm"], "--timing-until needs the timing pass"),
    ],
)
def test_bad_timing_options_are_one_line_config_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    argv = ["ab", "x", "x", "--inputs", str(tmp_path / "none.jsonl"), "--base-url-a", "http://127.0.0.1:9/v1",
            "--base-url-b", "http://127.0.0.1:9/v1", *options]  # fmt: skip
    assert main(argv) == 78
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_added_repetitions_are_in_the_plan_and_a_record_beyond_them_is_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make faults found it: a --timing-until session's added repetitions were read as records outside the
    plan ("damaged"), so its gate said NO VERDICT whatever the timing."""
    with FakeServer() as server:
        _noisy(server, 0.15)
        da, db = execute_ab(_config(server, tmp_path, TimingTarget(8.0)))
    rec = read_adaptive(da)
    assert rec is not None and rec.reps_done > REPS
    for run_dir in (da, db):
        info = score_run(run_dir).scores.run
        assert info.complete and not any("damaged" in w for w in info.warnings)
    capsys.readouterr()
    main(["gate", str(da), str(db)])  # NO VERDICT here anyway: this plan has no cold/warm pairs
    out = " ".join(capsys.readouterr().out.split())
    assert "damaged" not in out and "plan does not name" not in out
    # the timing rule reads the session, added repetitions included: a verdict, not no data for damage
    assert "warm_prefill_change: measured" in out and f"over {N_INPUTS} inputs" in out
    # a timing record edited to a repetition the session never added is still outside the plan
    path = db / RECORDS_NAME
    lines = path.read_text(encoding="utf-8").splitlines()
    last = next(i for i in range(len(lines) - 1, -1, -1) if '"timing_warm"' in lines[i])
    edited = json.loads(lines[last])
    edited["repetition"] = rec.reps_done + 3
    lines[last] = json.dumps(edited, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    info = score_run(db).scores.run
    assert not info.complete and any("plan does not name" in w for w in info.warnings)


SETTLE_PASSES = ("cold", "warm", "repeat", "timing")


def _settle_config(
    a: FakeServer, b: FakeServer, tmp_path: Path, target: TimingTarget, check: bool
) -> AbConfig:
    rows = [make_row(i, words=60 + 20 * i) for i in range(N_INPUTS)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=SETTLE_PASSES, timing_reps=REPS)
    cb = replace(ca, variant="var", topology=endpoints(b.base_url))
    policy_check = stop_check(load_policy(None)) if check else None
    return AbConfig(ca, cb, seed=5, quiet=True, stop_check=policy_check, timing_target=target)


def _cs_low_pct(x: list[float], horizon: int) -> float:
    """The lower end (percent) of the asymptotic CS at t = len(x)."""
    mean, r = _cs_by_hand(x, horizon)
    return 100 * math.expm1(mean - r)


def test_with_stop_when_settled_a_settled_fail_adds_no_repetition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make faults found it: the +50% slowdown FAILed at its planned repetitions, yet the session added
    repetitions until its budget (29 repetitions, 25 min), because the phase stopped on its half-width only."""
    target = TimingTarget(0.5, max_reps=6)
    with FakeServer() as a, FakeServer() as b:
        for server, seed in ((a, 1), (b, 2)):
            rng = random.Random(seed)
            server.prefill_noise = lambda rng=rng: rng.gauss(0.0, 0.1)
        b.warm_slowdown = 3.0
        da, db = execute_ab(_settle_config(a, b, tmp_path / "s", target, check=True))
        plain = execute_ab(_settle_config(a, b, tmp_path / "p", target, check=False))
    rec = read_adaptive(da)
    assert rec is not None and rec == read_adaptive(db)
    assert rec.stopped == "settled" and rec.reps_done == REPS
    assert "settled FAIL" in rec.reason and "warm_prefill_change" in rec.reason
    # the planned pairs alone already exclude the +10% limit (the CS recomputed here from the records)
    ratios = _ratios_by_hand(da, db)
    assert len(ratios) == N_INPUTS * REPS and _cs_low_pct(ratios, N_INPUTS * REPS) > 10.0
    # without --stop-when-settled the phase adds repetitions to its maximum, as before
    rec_plain = read_adaptive(plain[0])
    assert rec_plain is not None and rec_plain.stopped == "max_reps" and rec_plain.reps_done == 6
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 1
    assert "FAIL     warm_prefill_change" in capsys.readouterr().out


def test_an_aa_session_stops_adding_once_both_timing_rules_settle_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A/A: the phase adds rounds until the gate's intervals and the per-pair CS both say PASS (the target is
    out of reach), then stops, well before its maximum; the gate on the runs agrees."""
    with FakeServer() as server:
        _noisy(server, 0.15)
        da, db = execute_ab(
            _settle_config(server, server, tmp_path, TimingTarget(0.1, max_reps=40), check=True)
        )
    rec = read_adaptive(da)
    assert rec is not None and rec.stopped == "settled" and "settled PASS" in rec.reason
    assert REPS < rec.reps_done < 40
    assert "warm_prefill_change" in rec.reason and "cold_prefill_change" in rec.reason
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 0


def test_a_timing_only_session_stops_on_the_fail_the_gate_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make faults found it: the warm_slowdown case's plan has timing passes only, so the stop check saw the data
    reason "no cold/warm passes" and never settled, although the gate on the same runs FAILs
    warm_prefill_change (too few cold/warm pairs stop a PASS, not a FAIL): 38 repetitions where 2 decided it."""
    target = TimingTarget(0.5, max_reps=6)
    with FakeServer() as a, FakeServer() as b:
        for server, seed in ((a, 3), (b, 4)):
            rng = random.Random(seed)
            server.prefill_noise = lambda rng=rng: rng.gauss(0.0, 0.1)
        b.warm_slowdown = 3.0
        cfg = _settle_config(a, b, tmp_path, target, check=True)
        cfg = replace(cfg, a=replace(cfg.a, passes=("timing",)), b=replace(cfg.b, passes=("timing",)))
        da, db = execute_ab(cfg)
    rec = read_adaptive(da)
    assert rec is not None and rec.stopped == "settled" and rec.reps_done == REPS
    assert "settled FAIL" in rec.reason and "warm_prefill_change" in rec.reason
    assert _cs_low_pct(_ratios_by_hand(da, db), N_INPUTS * REPS) > 10.0
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 1
    assert "FAIL     warm_prefill_change" in capsys.readouterr().out


# The gated interval's t quantile for 6 inputs: 20 % trim leaves h = 4, so Student's t with 3 degrees of freedom
# at 0.9875 (97.5 % two-sided), from the tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2: t(0.99, 3) = 4.541,
# t(0.975, 3) = 3.182; t(0.9875, 3) = 4.1765).
T_9875_DF3 = 4.1765


def _yuen_half_width_by_hand(ratios: list[float], inputs: list[str]) -> float:
    """Yuen's 97.5 % interval over 6 inputs' mean log ratios (20 % trim), its half-width in percent."""
    groups: dict[str, list[float]] = {}
    for x, i in zip(ratios, inputs, strict=True):
        groups.setdefault(i, []).append(x)
    m = sorted(sum(v) / len(v) for v in groups.values())
    assert len(m) == 6
    g = 1
    trimmed = sum(m[g:-g]) / (len(m) - 2 * g)
    wins = [min(max(v, m[g]), m[-g - 1]) for v in m]
    wmean = sum(wins) / len(wins)
    sd = math.sqrt(sum((v - wmean) ** 2 for v in wins) / (len(wins) - 1))
    half = T_9875_DF3 * sd / ((1 - 2 * g / len(m)) * math.sqrt(len(m)))
    return 50 * (math.expm1(trimmed + half) - math.expm1(trimmed - half))


class _Synthetic:
    """extend_timing's hooks on made-up pairs: input i's log ratio is offsets[i] + N(0, sd); one server-second
    per pair."""

    def __init__(self, offsets: list[float], sd: float, seed: int) -> None:
        self.offsets, self.sd, self.rng = offsets, sd, random.Random(seed)
        self.ratios: list[float] = []
        self.inputs: list[str] = []
        self.units = [
            Unit(i, UNIT_TIMING, r, timing_steps(r)) for r in range(REPS) for i in range(len(offsets))
        ]
        for u in self.units:
            self.send(u)

    def send(self, unit: Unit) -> bool:
        self.ratios.append(self.offsets[unit.row_index] + self.rng.gauss(0.0, self.sd))
        self.inputs.append(f"d/{unit.row_index}")
        return True

    def look(self) -> Look:
        return Look(list(self.ratios), float(len(self.ratios)), [], list(self.inputs))

    def hooks(self) -> Hooks:
        return Hooks(self.send, self.look)


def test_the_target_waits_for_the_gated_interval_when_it_is_the_wider() -> None:
    """A real A/A session stopped on the sequence's half-width (8.9 %) while the interval the gate reads was
    [-10.4, +8.9] %: the target is met only when both half-widths are, at the first such look."""
    syn = _Synthetic([0.0] * N_INPUTS, sd=0.15, seed=6)
    rec = extend_timing(TimingTarget(10.0), syn.units, REPS, syn.hooks())
    horizon = N_INPUTS * REPS
    looks = range(N_INPUTS * REPS, len(syn.ratios) + 1, 2)  # after every AB/BA block of two pairs
    cs = {t: _half_width(syn.ratios[:t], horizon) for t in looks}
    gated = {t: _yuen_half_width_by_hand(syn.ratios[:t], syn.inputs[:t]) for t in looks}
    first_cs = min(t for t in looks if cs[t] <= 10.0)
    first_both = min(t for t in looks if max(cs[t], gated[t]) <= 10.0)
    assert first_cs < first_both  # the sequence alone would have stopped earlier
    assert rec.stopped == "target" and rec.pairs == first_both == len(syn.ratios)
    assert rec.half_width_pct == pytest.approx(cs[first_both])
    assert rec.gated_half_width_pct == pytest.approx(gated[first_both], rel=1e-4)  # the table's 4 decimals
    assert gated[first_cs] > 10.0  # what held the stop back at the sequence's first look under the target
    assert "warm, gated" in rec.reason and "the widest: warm, " in rec.reason


def test_an_input_level_spread_keeps_the_gated_interval_wide_to_the_last_repetition() -> None:
    """Inputs that differ from one another (a fixed per-input change) keep the gated interval wide however many
    pairs are added, while the sequence, which counts pairs, narrows: no stop on the target."""
    offsets = [-0.12, -0.06, 0.0, 0.03, 0.08, 0.14]
    syn = _Synthetic(offsets, sd=0.02, seed=3)
    horizon = N_INPUTS * REPS
    assert _half_width(syn.ratios, horizon) <= 10.0  # the planned pairs' sequence already meets the target
    rec = extend_timing(TimingTarget(10.0, max_reps=6), syn.units, REPS, syn.hooks())
    assert rec.stopped == "max_reps" and rec.reps_done == 6 and len(syn.ratios) == 6 * N_INPUTS
    assert rec.gated_half_width_pct == pytest.approx(
        _yuen_half_width_by_hand(syn.ratios, syn.inputs), rel=1e-4
    )
    assert rec.gated_half_width_pct is not None and rec.gated_half_width_pct > 10.0
    assert "warm, gated" in rec.reason


def test_a_figure_that_is_not_the_requests_own_enters_no_look(tmp_path: Path) -> None:
    """The adaptive phase read every record's server prefill, foreign or not; the comparison left foreign ones
    out (eval/records/server_figures.py). Both now read own_prefill_s."""
    with FakeServer() as server:
        _noisy(server, 0.15)
        da, db = execute_ab(_config(server, tmp_path, TimingTarget(90.0)))
    pairs = list(last_pairs(read_pairs(da)).values())
    ra, rb = (scan_records(d / RECORDS_NAME).records for d in (da, db))
    before = input_ratios(pairs, ra, rb)
    assert len(before) == len(_ratios_by_hand(da, db)) > 0
    warm = next(r for r in rb if r.pass_name == "timing_warm" and r.status == "ok")
    marked = [replace(r, server_foreign="finished moved by 2") if r is warm else r for r in rb]
    after = input_ratios(pairs, ra, marked)
    assert len(after) == len(before) - 1
    assert f"{warm.dataset}/{warm.example_id}" in {r.input_id for r in before}
    assert measure_ms(replace(warm, server_foreign="x"), "warm_prefill_ms") is None


def test_a_version_1_adaptive_record_still_reads(tmp_path: Path) -> None:
    v1 = {"schema_version": 1, "until_pct": 10.0, "budget_s": None, "reps_planned": 2, "reps_done": 3, "pairs": 18,
          "half_width_pct": 9.5, "spent_s": 12.0, "stopped": "target", "reason": "half-width 9.5% <= 10% (95% CS)"}  # fmt: skip
    (tmp_path / "adaptive.json").write_text(json.dumps(v1), encoding="utf-8")
    rec = read_adaptive(tmp_path)
    assert rec is not None and rec.half_width_pct == 9.5 and rec.gated_half_width_pct is None
    (tmp_path / "adaptive.json").write_text(json.dumps({**v1, "schema_version": 9}), encoding="utf-8")
    assert read_adaptive(tmp_path) is None


@pytest.mark.parametrize(
    ("planned", "max_reps", "rounds"),
    [
        (2, 8, [(2, 4), (4, 6), (6, 8)]),  # 2 repetitions per input a round
        (8, 30, [(8, 16), (16, 24), (24, 30)]),  # 8 a round, the last clipped at the maximum
        (3, 14, [(3, 6), (6, 10), (10, 14)]),  # odd: the first round ends on an even count (blocks 2k, 2k+1)
        (1, 6, [(1, 2), (2, 4), (4, 6)]),
    ],
)
def test_added_rounds(planned: int, max_reps: int, rounds: list[tuple[int, int]]) -> None:
    assert list(added_rounds(planned, max_reps)) == rounds
    units = [Unit(i, UNIT_TIMING, r, timing_steps(r)) for i in (2, 0, 1) for r in range(planned)]
    order = [(u.row_index, u.repetition) for u in added_order(units, max_reps)]
    by_hand = [(i, r) for first, end in rounds for i in (2, 0, 1) for r in range(first, end)]
    assert order == by_hand


def test_the_budget_is_checked_before_every_input_segment() -> None:
    """One server-second per pair, 12 planned pairs, rounds of 2 repetitions per input: the first segment's cost
    is unknown (sent), after it each next segment is assumed to cost 2 s, so a budget of 18 s allows three
    segments (12 + 3 x 2 = 18) and stops before the fourth, inside the first round."""
    syn = _Synthetic([0.0] * N_INPUTS, sd=0.15, seed=1)
    rec = extend_timing(TimingTarget(0.1, budget_s=18.0), syn.units, REPS, syn.hooks())
    assert rec.stopped == "budget" and rec.spent_s == 18.0 and len(syn.ratios) == 18
    assert syn.inputs[12:] == [f"d/{i}" for i in (0, 0, 1, 1, 2, 2)]
    assert rec.reps_done == REPS + 2  # the most repetitions any input holds (inputs 0-2), not every input


def test_a_timing_only_session_judges_what_it_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--passes timing`: the rules on the cold, warm and repeat passes and the cause rows have nothing to judge
    because nothing of theirs was planned. They are listed as not planned and the timing rules decide (it gave
    no verdict, every agreement rule 'no data')."""
    with FakeServer() as server:  # one server as both sides, no noise: the paired change is 0
        cfg = _config(server, tmp_path, TimingTarget(1.0))
        da, db = execute_ab(replace(cfg, timing_target=None))
    capsys.readouterr()
    assert main(["gate", str(da), str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for rule, what in (
        ("cold_warm_equality", "the cold and warm passes"),
        ("warm_repeat_equality", "the warm and repeat passes"),
        ("cold_scores", "the cold pass"),
        ("cross_variant_cold", "the cold pass"),
    ):
        assert f"SKIPPED {rule}: not planned: neither run planned {what}" in out, (rule, out)
    assert "SKIPPED cause_rows: not planned" in out
    assert "PASS warm_prefill_change" in out and "PASS cold_prefill_change" in out
    assert "NO DATA" not in out

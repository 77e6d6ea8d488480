"""Prometheus text parsing and the deltas a record keeps."""

from __future__ import annotations

import pytest

from eval.run.metrics_text import (
    counter_delta,
    histogram_delta,
    parse_metrics,
    request_deltas,
    went_backwards,
)

BEFORE = """\
# HELP process_start_time_seconds Start time.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e9
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",enable_prefix_caching="True",engine="0",note="a \\"quoted\\" \\\\ value"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e9
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 256.0
vllm:request_success_total{engine="0",finished_reason="stop"} 3.0
vllm:request_success_total{engine="0",finished_reason="length"} 2.0
vllm:request_prefill_time_seconds_bucket{engine="0",le="+Inf"} 5.0
vllm:request_prefill_time_seconds_count{engine="0"} 5.0
vllm:request_prefill_time_seconds_sum{engine="0"} 10.5
vllm:request_queue_time_seconds_count{engine="0"} 5.0
vllm:request_queue_time_seconds_sum{engine="0"} 0.5
vllm:time_to_first_token_seconds_count{engine="0"} 5.0
vllm:time_to_first_token_seconds_sum{engine="0"} 12.0
python_gc_objects_collected_total{generation="0"} 7.0
"""


def after(queries: float, hits: float, count: float, prefill_sum: float, start: str = "1.7e9") -> str:
    text = BEFORE.replace("process_start_time_seconds 1.7e9", f"process_start_time_seconds {start}")
    text = text.replace('model_name="m"} 1000.0', f'model_name="m"}} {queries}')
    text = text.replace('model_name="m"} 256.0', f'model_name="m"}} {hits}')
    text = text.replace('_count{engine="0"} 5.0', f'_count{{engine="0"}} {count}')
    return text.replace(
        'prefill_time_seconds_sum{engine="0"} 10.5', f'prefill_time_seconds_sum{{engine="0"}} {prefill_sum}'
    )


def test_parse_labels_sums_and_filters() -> None:
    snap = parse_metrics(BEFORE)
    info = snap.info_labels("vllm:cache_config_info")
    assert info is not None
    assert info["block_size"] == "128" and info["enable_prefix_caching"] == "True"
    assert info["note"] == 'a "quoted" \\ value'
    assert snap.counter("vllm:request_success") == 5.0
    assert snap.total("vllm:request_success_total", finished_reason="stop") == 3.0
    assert snap.counter("vllm:prefix_cache_hits") == 256.0
    assert snap.total("python_gc_objects_collected_total") is None  # not kept by default
    assert parse_metrics(BEFORE, prefixes=None).total("python_gc_objects_collected_total") == 7.0


def test_bad_line_names_the_line() -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_metrics("vllm:a 1\nvllm:b{x=unquoted} 2\n")


def test_request_deltas_for_one_request() -> None:
    a = parse_metrics(BEFORE)
    b = parse_metrics(after(queries=1300.0, hits=512.0, count=6.0, prefill_sum=11.25))
    assert counter_delta(a, b, "vllm:prefix_cache_queries") == 300.0
    h = histogram_delta(a, b, "vllm:request_prefill_time_seconds")
    assert h is not None and h.count == 1.0 and h.sum == 0.75
    d = request_deltas(a, b)
    assert d["prefix_cache_queries"] == 300.0 and d["prefix_cache_hits"] == 256.0
    assert d["prefill_time_s"] == 0.75 and d["requests"] == 1.0
    assert d["queue_time_s"] == 0.0 and d["ttft_s"] == 0.0
    assert not went_backwards(a, b)


def test_request_deltas_drop_sums_when_not_exactly_one_request() -> None:
    a = parse_metrics(BEFORE)
    b = parse_metrics(after(queries=1000.0, hits=256.0, count=7.0, prefill_sum=12.0))
    d = request_deltas(a, b)
    assert "prefill_time_s" not in d and d["requests"] == 2.0


def test_restart_is_seen_from_start_time_or_counters() -> None:
    a = parse_metrics(BEFORE)
    assert went_backwards(a, parse_metrics(after(1000.0, 256.0, 5.0, 10.5, start="1.8e9")))
    assert went_backwards(a, parse_metrics(after(10.0, 0.0, 1.0, 0.1)))

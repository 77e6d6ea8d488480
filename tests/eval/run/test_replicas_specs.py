"""Launch specs of replicas (eval/serve/launch_specs.py, eval/run/replicas.py): `url` as a list, `dp_ranks`, and a
GPU spec's `devices` split into one CUDA_VISIBLE_DEVICES per replica (the env each replica's process would get;
no GPU here), while a CPU spec keeps its thread binding."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.errors import ConfigError
from eval.run.config import RunConfig, resolve_topology
from eval.run.replicas import (
    CPU_BIND_ENV,
    GPU_DEVICES_ENV,
    device_sets,
    dp_ranks,
    host_devices,
    replica_count,
    replica_specs,
)
from eval.serve.launch_specs import flag_int, get_launch_spec, parse_spec


def spec_raw(**kw: object) -> dict[str, object]:
    return {"command": ["serve"], "args": ["--port", "{port}"], **kw}


def test_a_url_list_is_running_replicas() -> None:
    spec = parse_spec("two", {"url": ["http://a:1/v1/", "http://b:2/v1"]}, "t.toml", {})
    assert (spec.url, spec.urls, spec.managed) == ("http://a:1/v1", ("http://a:1/v1", "http://b:2/v1"), False)
    one = parse_spec("one", {"url": "http://a:1/v1"}, "t.toml", {})
    assert (one.url, one.urls) == ("http://a:1/v1", ())  # one URL: no replicas list


def test_a_url_list_expands_the_environment() -> None:
    spec = parse_spec("e", {"url": ["http://${H}:1/v1", "http://b:2/v1"]}, "t.toml", {"H": "h0"})
    assert spec.urls[0] == "http://h0:1/v1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"url": []}, "expected a URL or a list of 1-64 URLs"),
        ({"url": ["http://a:1/v1", 3]}, "expected a URL or a list"),
        ({"url": ["http://a:1/v1", "ftp://b"]}, r"expected http\(s\)://host:port/v1, got 'ftp://b'"),
        ({"url": ["http://a:1/v1", "http://a:1/v1/"]}, "are one server, given 2 times"),
        ({"url": ["http://127.0.0.1:1/v1", "http://localhost:1"]}, "are one server, given 2 times"),
        ({"url": ["http://a:1/v1", "http://b:1/v1"], "dp_ranks": 2}, "dp_ranks routes through one endpoint"),
        ({"url": "http://a:1/v1", "dp_ranks": 0}, "dp_ranks: expected a whole number of data-parallel ranks"),
        ({"url": "http://a:1/v1", "devices": [0]}, "cannot be combined with devices"),
        (spec_raw(replicas=2, dp_ranks=2), "dp_ranks routes through one endpoint, not 2"),
        (spec_raw(devices=[]), 'expected "auto" or a list of distinct device numbers'),
        (spec_raw(devices=[0, 0]), "distinct device numbers"),
        (spec_raw(devices=[-1]), "distinct device numbers"),
        (spec_raw(devices=[True]), "distinct device numbers"),
    ],
)
def test_bad_replica_fields_are_refused(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_spec("x", raw, "t.toml", {})


def test_dp_ranks_on_a_spec() -> None:
    assert parse_spec("r", {"url": "http://a:1/v1", "dp_ranks": 8}, "t.toml", {}).dp_ranks == 8
    assert parse_spec("m", spec_raw(dp_ranks=2), "t.toml", {}).dp_ranks == 2


@pytest.mark.parametrize(
    ("devices", "n", "expected"),
    [
        (list(range(8)), 8, ["0", "1", "2", "3", "4", "5", "6", "7"]),
        (list(range(8)), 4, ["0,1", "2,3", "4,5", "6,7"]),
        (list(range(8)), 2, ["0,1,2,3", "4,5,6,7"]),
        ([4, 5, 6, 7], 2, ["4,5", "6,7"]),
        ([3], 1, ["3"]),
    ],
)
def test_device_sets_split_evenly(devices: list[int], n: int, expected: list[str]) -> None:
    assert device_sets(devices, n) == expected


@pytest.mark.parametrize(("devices", "n"), [([0, 1, 2], 2), ([0], 2), ([], 1)])
def test_devices_that_do_not_split_evenly_are_refused(devices: list[int], n: int) -> None:
    with pytest.raises(ConfigError, match="do not split evenly between"):
        device_sets(devices, n)


def test_a_gpu_spec_gives_each_replica_its_devices_and_no_thread_binding() -> None:
    spec = parse_spec("g8", spec_raw(replicas=8, devices=list(range(8)), env={"A": "1"}), "t.toml", {})
    assert spec.devices == tuple(range(8))
    envs = [s.env for s in replica_specs(spec, [0, 1], spec.devices)]
    assert envs == [{"A": "1", GPU_DEVICES_ENV: str(d)} for d in range(8)]
    four = parse_spec("g4", spec_raw(replicas=4, devices="auto"), "t.toml", {})
    assert [s.env[GPU_DEVICES_ENV] for s in replica_specs(four, [0, 1], (0, 1, 2, 3, 4, 5, 6, 7))] == [
        "0,1",
        "2,3",
        "4,5",
        "6,7",
    ]
    clash = parse_spec("c", spec_raw(replicas=2, devices=[0, 1], env={GPU_DEVICES_ENV: "0"}), "t.toml", {})
    with pytest.raises(ConfigError, match="env sets CUDA_VISIBLE_DEVICES and `devices` splits them"):
        replica_specs(clash, [], (0, 1))


def test_a_cpu_spec_keeps_its_thread_binding() -> None:
    spec = parse_spec("c2", spec_raw(replicas=2), "t.toml", {})
    envs = [s.env for s in replica_specs(spec, [0, 1, 2, 3])]
    assert envs == [{CPU_BIND_ENV: "0-1"}, {CPU_BIND_ENV: "2-3"}]  # and no CUDA_VISIBLE_DEVICES


def test_host_devices_from_the_environment_or_the_device_files(tmp_path: Path) -> None:
    assert host_devices({GPU_DEVICES_ENV: "4,5, 6"}) == (4, 5, 6)
    with pytest.raises(ConfigError, match="not a list of device numbers; give `devices`"):
        host_devices({GPU_DEVICES_ENV: "GPU-8c1e0a"})
    for name in ("nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm", "nvidia10"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert host_devices({}, dev=str(tmp_path)) == (0, 1, 10)
    assert host_devices({}, dev=str(tmp_path / "none")) == ()


def test_the_shipped_dp_spec_is_cpu_smollm2_with_two_pinned_ranks() -> None:
    base = get_launch_spec("cpu-smollm2", environ={"LBEVAL_CACHE": "/c"})
    spec = get_launch_spec("cpu-smollm2-dp2", environ={"LBEVAL_CACHE": "/c"})
    assert spec.args == (*base.args, "--data-parallel-size", "2") and spec.model == base.model
    assert (spec.dp_ranks, spec.replicas, flag_int(spec.args, "--data-parallel-size")) == (2, 1, 2)
    config = RunConfig(variant="v", inputs=Path("i"), topology=resolve_topology((), spec))
    assert (dp_ranks(config), replica_count(config)) == (2, 2)

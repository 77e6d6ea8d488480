"""The example launch specs of docs/servers/replicas.md parse with lbeval's own loader and say what the page says:
8 GPU replicas with a device each, the hand-started ranks as a URL list, an internal-DP routing endpoint with 8
pinned ranks, Ray Serve LLM as single-replica apps, llm-d's pods one by one and its gateway as one server."""

from __future__ import annotations

import re
from pathlib import Path

from eval.run.config import RunConfig, endpoints, resolve_topology
from eval.run.replicas import CPU_BIND_ENV, GPU_DEVICES_ENV, dp_ranks, replica_count, replica_specs
from eval.serve.launch_specs import LaunchSpec, flag_int, load_launch_specs

DOC = Path(__file__).resolve().parents[3] / "docs" / "servers" / "replicas.md"
BLOCK_RE = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def doc_specs(tmp_path: Path) -> dict[str, LaunchSpec]:
    """Every variant the page's toml blocks define (each block loaded alone, on top of the shipped specs)."""
    out: dict[str, LaunchSpec] = {}
    blocks = BLOCK_RE.findall(DOC.read_text(encoding="utf-8"))
    for i, text in enumerate(blocks):
        path = tmp_path / f"block{i}.toml"
        path.write_text(text, encoding="utf-8")
        shipped = load_launch_specs(environ={"LBEVAL_CACHE": "/c"})
        specs = load_launch_specs([path], environ={"LBEVAL_CACHE": "/c"})
        out.update({name: spec for name, spec in specs.items() if name not in shipped})
    return out


def config(spec: LaunchSpec) -> RunConfig:
    if spec.managed:
        return RunConfig(variant=spec.name, inputs=Path("i"), topology=resolve_topology((), spec))
    where = endpoints(*(spec.urls or (str(spec.url),)), dp_ranks=spec.dp_ranks)
    return RunConfig(variant=spec.name, inputs=Path("i"), topology=where)


def test_the_page_defines_the_specs_it_describes(tmp_path: Path) -> None:
    assert sorted(doc_specs(tmp_path)) == [
        "gpu8",
        "gpu8-internal-dp",
        "gpu8-running",
        "internal-dp-running",
        "llm-d-gateway",
        "llm-d-pods",
        "my-x4",
        "ray-serve-4",
    ]


def test_eight_gpus_one_replica_per_device(tmp_path: Path) -> None:
    spec = doc_specs(tmp_path)["gpu8"]
    assert spec.managed and spec.port is None and (spec.replicas, spec.dp_ranks) == (8, 1)
    assert spec.devices == tuple(range(8)) and replica_count(config(spec)) == 8
    envs = [s.env for s in replica_specs(spec, [0, 1], spec.devices)]
    assert [e[GPU_DEVICES_ENV] for e in envs] == [str(d) for d in range(8)]  # one device each
    assert all(CPU_BIND_ENV not in e and e["VLLM_SERVER_DEV_MODE"] == "1" for e in envs)
    assert (
        "--enable-prompt-tokens-details" in spec.args and flag_int(spec.args, "--data-parallel-size") is None
    )


def test_the_hand_started_ranks_are_a_url_list(tmp_path: Path) -> None:
    spec = doc_specs(tmp_path)["gpu8-running"]
    assert not spec.managed and len(spec.urls) == 8 and len(set(spec.urls)) == 8
    assert [int(re.findall(r":(\d+)/v1$", u)[0]) for u in spec.urls] == list(range(8000, 8008))


def test_the_routing_endpoint_pins_eight_ranks(tmp_path: Path) -> None:
    specs = doc_specs(tmp_path)
    started, running = specs["gpu8-internal-dp"], specs["internal-dp-running"]
    assert started.managed and started.replicas == 1 and started.devices is None  # one process, all devices
    assert flag_int(started.args, "--data-parallel-size") == started.dp_ranks == 8
    assert started.env[GPU_DEVICES_ENV] == "0,1,2,3,4,5,6,7"
    assert (dp_ranks(config(started)), replica_count(config(started))) == (8, 8)
    assert not running.managed and running.urls == () and dp_ranks(config(running)) == 8


def test_ray_serve_and_llm_d(tmp_path: Path) -> None:
    specs = doc_specs(tmp_path)
    ray = specs["ray-serve-4"]
    assert [u.split("/")[-2] for u in ray.urls] == ["r0", "r1", "r2", "r3"]  # one route prefix per app
    pods, gateway = specs["llm-d-pods"], specs["llm-d-gateway"]
    assert len(pods.urls) == 2 and not pods.managed
    assert gateway.urls == () and gateway.dp_ranks == 1  # one server to lbeval, unpinned
    assert specs["my-x4"].replicas == 4

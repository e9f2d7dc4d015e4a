"""One simulated fleet: `enginedeck demo` and `enginedeck sim --fleet` start the same simulators
(flavours, served models, KV pool, seeds), from one definition."""

from __future__ import annotations

import argparse

import psutil

from console.cli import build_parser
from console.commands.demo import FLAVOURS, demo_config
from console.lifecycle.launch import build_launch
from console.sim.fleet import start_fleet


def _sim_args(argv: list[str]) -> argparse.Namespace:
    """``python -m console sim ...`` read by the real `sim` parser."""
    i = argv.index("console")
    assert argv[i - 1] == "-m" and argv[i + 1] == "sim", argv
    return build_parser().parse_args(argv[i + 1 :])


def _what(ns: argparse.Namespace) -> tuple[str, str, int, int | None]:
    return ns.engine, ns.model, ns.seed, ns.kv_blocks


def test_demo_and_sim_fleet_start_the_same_simulators() -> None:
    demo = demo_config({f: 20000 + i for i, f in enumerate(FLAVOURS)}, seed=3)
    demo_sims = {}
    for inst in demo.instances:
        ns = _sim_args(list(build_launch(inst).argv))
        assert ns.port == inst.config.port
        demo_sims[ns.engine] = _what(ns)
    assert sorted(demo_sims) == sorted(FLAVOURS) == sorted(("vllm", "sglang", "trtllm", "tgi"))

    fleet = start_fleet(["vllm", "sglang"], load=True, seed=3)
    try:
        fleet_sims = {}
        for engine, url, pid in fleet.endpoints:
            ns = _sim_args(psutil.Process(pid).cmdline())
            assert url.endswith(f":{ns.port}")
            fleet_sims[engine] = _what(ns)
    finally:
        fleet.stop()
    # Same model, seed and KV pool for the same member of the fleet.
    assert fleet_sims == {e: demo_sims[e] for e in ("vllm", "sglang")}
    assert fleet_sims["vllm"][3] is not None and fleet_sims["vllm"][3] < 1000  # the small pool that load fills


def test_a_fleet_without_load_keeps_the_default_kv_pool() -> None:
    fleet = start_fleet(["vllm"], load=False, seed=0)
    try:
        (_, _, pid), = fleet.endpoints
        assert _sim_args(psutil.Process(pid).cmdline()).kv_blocks is None
    finally:
        fleet.stop()

"""What a simulated fleet is made of, for every place that starts one: ``enginedeck sim --fleet``
(``fleet.start_fleet``: child processes) and ``enginedeck demo`` (the same simulators as managed
engines of the lifecycle). The flavours, the model each serves, the KV pool, the seeds and the
command line that starts one member are defined here once.

Imports nothing heavy: ``enginedeck demo --help`` must not load the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FLEET_ENGINES = ("vllm", "sglang", "trtllm", "tgi")
# A small KV pool (in 16-token blocks) so the synthetic load fills it at its peaks: KV usage, the
# waiting queue and preemptions visibly move. llama.cpp keeps its per-slot contexts.
FLEET_KV_BLOCKS = 448
KV_POOL_ENGINES = frozenset(FLEET_ENGINES)

# Served model names when none is given (what each engine would typically show).
DEFAULT_MODELS = {
    "vllm": "Qwen/Qwen3-0.6B",
    "sglang": "Qwen/Qwen3-0.6B",
    "trtllm": "Qwen3-0.6B",
    "tgi": "Qwen/Qwen3-0.6B",
    "llamacpp": "qwen3-0.6b",
}


@dataclass(frozen=True, slots=True)
class FleetMember:
    """One simulated engine of a fleet."""

    engine: str
    model: str
    seed: int
    kv_blocks: int | None = None

    def sim_args(self, host: str, port: str, model: str | None = None) -> list[str]:
        """The ``sim`` subcommand's arguments (after ``python -m console``) that start this member.
        ``port``/``model`` may be placeholders of a launch template ("{port}", "{model}")."""
        args = ["sim", "--engine", self.engine, "--host", host, "--port", port, "--model", model or self.model,
                "--seed", str(self.seed)]  # fmt: skip
        if self.kv_blocks is not None:
            args += ["--kv-blocks", str(self.kv_blocks)]
        return args


def fleet_members(engines: Sequence[str] = FLEET_ENGINES, *, seed: int, small_kv: bool = True) -> list[FleetMember]:
    """One member per engine, in order: member ``i`` gets seed ``seed + i``, and with ``small_kv``
    the small KV pool where the flavour has a paged one (not llama.cpp)."""
    kv = FLEET_KV_BLOCKS if small_kv else None
    return [
        FleetMember(engine, DEFAULT_MODELS[engine], seed + i, kv if engine in KV_POOL_ENGINES else None)
        for i, engine in enumerate(engines)
    ]

"""One module per simulated engine flavour."""

from __future__ import annotations

from console.sim.engines.base import Flavour, SimOptions
from console.sim.engines.llamacpp import LlamacppFlavour
from console.sim.engines.sglang import SglangFlavour
from console.sim.engines.tgi import TgiFlavour
from console.sim.engines.trtllm import TrtllmFlavour
from console.sim.engines.vllm import VllmFlavour

FLAVOURS: dict[str, type[Flavour]] = {
    "vllm": VllmFlavour,
    "sglang": SglangFlavour,
    "trtllm": TrtllmFlavour,
    "tgi": TgiFlavour,
    "llamacpp": LlamacppFlavour,
}

# Served model names when none is given (what each engine would typically show).
DEFAULT_MODELS = {
    "vllm": "Qwen/Qwen3-0.6B",
    "sglang": "Qwen/Qwen3-0.6B",
    "trtllm": "Qwen3-0.6B",
    "tgi": "Qwen/Qwen3-0.6B",
    "llamacpp": "qwen3-0.6b",
}


def make_flavour(opts: SimOptions) -> Flavour:
    return FLAVOURS[opts.engine](opts)


__all__ = ["DEFAULT_MODELS", "FLAVOURS", "Flavour", "SimOptions", "make_flavour"]

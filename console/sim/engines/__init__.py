"""One module per simulated engine flavour (``base``: what they share), and ``FLAVOURS`` by name.

May import only ``console.sim``.
"""

from __future__ import annotations

from console.sim.engines.base import Flavour, SimOptions
from console.sim.engines.llamacpp import LlamacppFlavour
from console.sim.engines.sglang import SglangFlavour
from console.sim.engines.tgi import TgiFlavour
from console.sim.engines.trtllm import TrtllmFlavour
from console.sim.engines.vllm import VllmFlavour
from console.sim.fleet_spec import DEFAULT_MODELS

FLAVOURS: dict[str, type[Flavour]] = {
    "vllm": VllmFlavour,
    "sglang": SglangFlavour,
    "trtllm": TrtllmFlavour,
    "tgi": TgiFlavour,
    "llamacpp": LlamacppFlavour,
}


def make_flavour(opts: SimOptions) -> Flavour:
    return FLAVOURS[opts.engine](opts)


__all__ = ["DEFAULT_MODELS", "FLAVOURS", "Flavour", "SimOptions", "make_flavour"]

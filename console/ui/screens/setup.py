"""Shown when nothing is configured: how to configure, how to attach, and the demo on one key."""

from __future__ import annotations

from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

EXAMPLE_CONFIG = """\
[console]
refresh = 1.0            # seconds
# read_only = true

[engines.llama-vllm]     # watch an engine that is already running
profile = "vllm"         # vllm | sglang | trtllm | tgi | llamacpp
url = "http://127.0.0.1:8000"
# api_key_env = "VLLM_API_KEY"   # the NAME of the variable, never the key

[engines.qwen-sglang]
profile = "sglang"
url = "http://127.0.0.1:30000"
"""


class SetupScreen(Screen[None]):
    BINDINGS: ClassVar = [
        Binding("d", "demo", "Run the demo"),
        Binding("q", "quit_app", "Quit"),
    ]

    def __init__(self, config_path: str) -> None:
        super().__init__()
        self.config_path = config_path

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="setup"):
            yield Static(Text.assemble(
                ("No engines configured.", "bold"),
                "  Try it now with no GPU: press ", ("d", "bold reverse"),
                " for the demo (simulated vLLM, SGLang, TensorRT-LLM and TGI on 8 simulated GPUs; "
                "also `enginedeck demo`).",
            ))
            yield Static(Text.assemble(
                ("Watch running endpoints, no file needed:\n", "bold"),
                "  enginedeck attach vllm@http://127.0.0.1:8000 sglang@http://10.0.0.5:30000\n",
                "  (add --api-key-env NAME when the engine needs a key)",
            ))
            yield Static(Text.assemble(("Or configure them in ", "bold"), (self.config_path, "bold"), ":"))
            yield Static(Syntax(EXAMPLE_CONFIG, "toml", theme="ansi_dark", background_color="default"),
                         id="setup-example")
        yield Footer()

    def action_demo(self) -> None:
        self.app.exit("demo")

    def action_quit_app(self) -> None:
        self.app.exit(None)

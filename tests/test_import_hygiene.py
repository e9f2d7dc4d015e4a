"""The layering holds at run time: checked in fresh interpreters, so nothing imported by other tests hides
a violation.

- The UI-free core (telemetry, lifecycle, the load/bench/playground clients, the simulator) loads no
  Textual.
- `enginedeck --help` builds every subcommand's parser but loads nothing heavy: the lifecycle, the
  HTTP clients, pydantic (config), Docker and Textual come in only with the command that runs.
"""

from __future__ import annotations

import json
import pkgutil
import sys

import pytest

import console
from tests import procgroup

CORE_PACKAGES = ("console.telemetry", "console.transport", "console.lifecycle", "console.client", "console.sim")
HEAVY = ("textual", "rich", "httpx", "aiohttp", "pydantic", "docker", "pynvml", "prometheus_client",
         "console.lifecycle", "console.config", "console.telemetry", "console.ui")


def _loaded_after(code: str) -> list[str]:
    # A None in sys.modules is an import blocked on purpose (cli._skip_unused_imports), not a module.
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(m for m, v in sys.modules.items() if v is not None)))"
    out = procgroup.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def _core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(console.__path__, "console."):
        if info.name.startswith(CORE_PACKAGES):
            names.append(info.name)
    assert len(names) > 40, names  # the walk found the packages (a broken walk must not pass silently)
    return names


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_core_loads_no_textual(package: str) -> None:
    modules = [m for m in _core_modules() if m == package or m.startswith(package + ".")]
    loaded = _loaded_after("\n".join(f"import {m}" for m in modules))
    assert set(modules) <= set(loaded)
    ui = [m for m in loaded if m == "textual" or m.startswith(("textual.", "console.ui"))]
    assert not ui, f"{package} pulls in {ui[:5]}"


def test_help_loads_nothing_heavy() -> None:
    loaded = _loaded_after(
        "import contextlib, io\n"
        "from console.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])"
    )
    assert "console.commands.status" in loaded and "console.commands.up" in loaded  # parsers were built
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert not heavy, f"--help imports {heavy[:8]}"


def test_console_start_skips_httpx_command_line() -> None:
    """httpx's own CLI (click, pygments) is not imported by a command of the console, and httpx works."""
    loaded = _loaded_after(
        "from console.cli import _skip_unused_imports\n"
        "_skip_unused_imports()\n"
        "import httpx\n"
        "assert httpx.Client and httpx.AsyncClient and callable(httpx.main)"
    )
    assert "httpx" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("click", "pygments") or m == "httpx._main"]


def test_a_command_builds_only_its_own_parser() -> None:
    """`enginedeck attach ...` reads its arguments with the attach parser alone; `--help` and a
    mistyped command still get the whole command line."""
    loaded = _loaded_after(
        "import contextlib, io\n"
        "from console.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['attach', '--help'])"
    )
    commands = [m for m in loaded if m.startswith("console.commands.") and m != "console.commands._args"]
    assert commands == ["console.commands.attach"], commands
    from console.cli import _parser_for, _subcommand_names

    assert _subcommand_names(_parser_for("inspect-metrics")) == {"inspect-metrics"}
    for whole in ("--help", "atach", "_args", ""):
        assert {"attach", "status", "up", "tui"} <= _subcommand_names(_parser_for(whole)), whole


def test_the_live_console_runs_without_httpx_or_pydantic() -> None:
    """Scrapes go over the console's own HTTP client: the console and a hub that has collected
    load no httpx (its import alone is ~110 ms and ~6 MB, and its per-scrape CPU six times as much).
    Configuration, profiles and alert rules are read by console.schema: no pydantic (17 MB, 160 ms).
    A TextArea is recognised without importing its module (console.ui.widgets.text_box)."""
    loaded = _loaded_after(
        "import time\n"
        "import console.commands.attach, console.ui.app\n"
        "from console.alerts.rules import load_rules\n"
        "from console.config import load_config, parse_engine_ref\n"
        "load_config(), load_rules()\n"
        "from console.ports import free_port\n"
        "from console.telemetry.hub import Hub\n"
        "hub = Hub([parse_engine_ref(f'vllm@http://127.0.0.1:{free_port()}')], refresh=0.2, gpu_source='none')\n"
        "hub.start()\n"
        "deadline = time.monotonic() + 30\n"
        "while 'refused' not in hub.latest().engines[0].health_detail and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "assert 'refused' in hub.latest().engines[0].health_detail\n"
        "hub.stop()"
    )
    assert "console.telemetry.engine.scrape" in loaded and "console.ui.app" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("httpx", "httpcore", "anyio", "h11", "pydantic",
                                                         "pydantic_core")]
    # TextArea (documents, tree-sitter) comes with the screens that show one, not with the overview.
    assert "textual.widgets._text_area" not in loaded

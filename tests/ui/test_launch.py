"""Console flags shared by `enginedeck`, `demo` and `attach`: parsing and precedence over the file."""

from __future__ import annotations

import argparse

import pytest

from console.cli import build_parser
from console.config import Config, ConsoleSettings
from console.errors import UserError
from console.ui.control import LifecycleControl
from console.ui.launch import _policy_action, resolve_settings
from tests import procgroup
from tests.ui.test_app import RecordingControl


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", [["tui"], ["demo"], ["attach", "vllm@http://127.0.0.1:8000"]])
def test_every_console_command_takes_the_common_flags(command: list[str]) -> None:
    args = _args(*command, "--read-only", "--layout", "compact", "--refresh", "2", "--no-mouse",
                 "--config", "/x.toml")
    assert (args.read_only, args.layout, args.refresh, args.no_mouse, args.config) == (
        True, "compact", 2.0, True, "/x.toml")


def test_flags_override_the_config_file() -> None:
    config = Config(path=None, console=ConsoleSettings(refresh=5.0, layout="wide", read_only=False, mouse=True))
    s = resolve_settings(_args("tui", "--read-only", "--refresh", "0.5", "--no-mouse"), config)
    assert (s.read_only, s.refresh, s.mouse, s.layout) == (True, 0.5, False, "wide")
    s = resolve_settings(_args("tui"), config)
    assert (s.read_only, s.refresh, s.mouse, s.layout) == (False, 5.0, True, "wide")


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--layout", "tiny", "unknown layout"),
    ("--refresh", "0", "between 0.1 and 60"),
])
def test_bad_flags_are_one_line_errors(flag: str, value: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        resolve_settings(_args("tui", flag, value), Config(path=None))


def test_the_terminal_loss_policy_goes_through_engine_control() -> None:
    control = RecordingControl()
    typed: LifecycleControl = control  # the test double states the whole protocol (checked by mypy)
    action = _policy_action(typed, ConsoleSettings(on_terminal_loss="stop"))
    assert action is not None
    action("SIGHUP received", 12.5)
    assert control.calls == [("terminal-loss stop", "SIGHUP received")]
    # Without engine control there is nothing to apply.
    assert _policy_action(None, ConsoleSettings(on_terminal_loss="stop")) is None


def test_a_console_without_engine_control_starts_without_the_lifecycle_package() -> None:
    """`attach` starts no process, so its start does not import the lifecycle package (about 0.13 s
    of CPU before the first frame) just to have a last resort that would find nothing to kill."""
    import sys

    code = (
        "import sys\n"
        "from console.ui.launch import add_last_resort\n"
        "from console.ui.terminal_guard import TerminalGuard\n"
        "guard = TerminalGuard()\n"
        "add_last_resort(guard, None)\n"
        "print(sorted(m for m in sys.modules if m.startswith('console.lifecycle')))\n"
        "add_last_resort(guard, object())\n"
        "print('console.lifecycle.terminal_loss' in sys.modules)\n"
    )
    out = procgroup.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == ["[]", "True"]

"""Starting the console from the CLI: common flags, the Hub, the app, and clean shutdown.

Imports Textual and the telemetry hub lazily so `enginedeck status` and `--help` stay fast.
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, Literal

from console.config import Config, ConsoleSettings, EngineInstance
from console.errors import UserError


def add_console_flags(p: argparse.ArgumentParser) -> None:
    """The flags `enginedeck`, `enginedeck demo` and `enginedeck attach` share."""
    g = p.add_argument_group("console")
    g.add_argument("--read-only", action="store_true", default=None,
                   help="no mutating action anywhere (start/stop/restart are hidden and refused)")
    g.add_argument("--layout", metavar="NAME", default=None,
                   help="auto (by terminal size), compact, default or wide (layouts/*.tcss)")
    g.add_argument("--refresh", metavar="SECS", type=float, default=None, help="collection period (default 1)")
    g.add_argument("--no-mouse", action="store_true", default=None,
                   help="do not capture the mouse (native terminal selection and copy work, e.g. over SSH)")
    g.add_argument("--config", metavar="FILE", default=None, help="configuration file (default: platform path)")


def resolve_settings(args: argparse.Namespace, config: Config) -> ConsoleSettings:
    """Command-line flags over the config file's [console] table."""
    s = config.console
    updates: dict[str, Any] = {}
    if args.read_only:
        updates["read_only"] = True
    if args.layout is not None:
        from console.ui.app import layout_names

        known = ["auto", *layout_names()]
        if args.layout not in known:
            raise UserError(f"--layout {args.layout!r}: unknown layout (known: {', '.join(known)})")
        updates["layout"] = args.layout
    if args.refresh is not None:
        if not 0.1 <= args.refresh <= 60:
            raise UserError(f"--refresh {args.refresh:g}: give seconds between 0.1 and 60")
        updates["refresh"] = args.refresh
    if args.no_mouse:
        updates["mouse"] = False
    return s.model_copy(update=updates)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def install_exit_signals() -> None:
    """Outside the app's loop, SIGTERM/SIGHUP unwind through `finally` (cleanup runs)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)


def run_console(
    instances: Sequence[EngineInstance],
    settings: ConsoleSettings,
    *,
    simulated: bool = False,
    gpu_source: Literal["nvml", "simulated", "none"] | None = None,
    gpu_assignment: Mapping[str, tuple[int, ...]] | None = None,
    config: Config | None = None,
    title: str = "",
    check_backing: Callable[[], str | None] | None = None,
    lifecycle: Any | None = None,
    pids_of: Callable[[str], tuple[int, ...]] | None = None,
) -> str | None:
    """Run the console until quit; returns the app's result ("demo" from the setup screen).

    ``lifecycle``: engine control already built by the caller (the demo); otherwise one is made
    from ``config`` when it has managed engines. ``pids_of``: current process ids per engine."""
    from console.telemetry.hub import Hub
    from console.ui.app import DeckApp, UiOptions

    install_exit_signals()
    # Engine control also serves logs, so it exists in read-only mode too (its actions are refused there).
    if lifecycle is None and config is not None:
        lifecycle = _lifecycle(config)
    phase_of = getattr(lifecycle, "phase_of", None)
    hub = Hub(instances, refresh=settings.refresh, gpu_source=gpu_source or settings.gpu_source,
              gpu_assignment=gpu_assignment, pids_of=pids_of or getattr(lifecycle, "pids_of", None),
              lifecycle_phase=phase_of if callable(phase_of) else None)
    hub.start()
    try:
        app = DeckApp(
            hub,
            options=UiOptions(read_only=settings.read_only, layout=settings.layout, mouse=settings.mouse,
                              simulated=simulated, title=title),
            profiles={i.profile.name: i.profile for i in instances},
            instances={i.name: i for i in instances},
            lifecycle=lifecycle,
            check_backing=check_backing,
        )
        return app.run(mouse=settings.mouse)
    finally:
        install_exit_signals()  # the app's loop removed its handlers; keep cleanup reachable
        hub.stop()
        if lifecycle is not None:
            lifecycle.close()


def run_setup(settings: ConsoleSettings, config_path: str) -> str | None:
    """The no-configuration screen; returns "demo" when the user asks for the demo."""
    from console.ui.app import DeckApp, UiOptions

    app = DeckApp(None, options=UiOptions(layout=settings.layout, mouse=settings.mouse,
                                          setup_config_path=config_path))
    return app.run(mouse=settings.mouse)


def _lifecycle(config: Config) -> Any:
    """Engine control for managed instances (None when none is managed)."""
    if not any(i.managed for i in config.instances):
        return None
    from console.ui.control_lifecycle import ManagerControl

    return ManagerControl.from_config(config)

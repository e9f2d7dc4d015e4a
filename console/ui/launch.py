"""Starting the console from the CLI: common flags, the Hub, the app, and clean shutdown.

While the app runs, a ``TerminalGuard`` holds the shutdown deadline: on SIGHUP, SIGTERM, SIGINT
or a hung-up terminal the console asks the app to leave, applies the ``on_terminal_loss`` policy
to its managed engines, and has ended within ``terminal_guard.DEADLINE`` seconds whatever else
blocks. Imports Textual and the telemetry hub lazily so `enginedeck status` and `--help` stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from console import gc_control
from console.config import Config, ConsoleSettings, EngineInstance
from console.errors import UserError
from console.hosts import HostTarget
from console.sources import KubeTarget, PromTarget

if TYPE_CHECKING:
    from console.recording.replay import ReplaySource
    from console.telemetry.source import FleetSource
    from console.ui.actions import ActionRegistry
    from console.ui.app import DeckApp
    from console.ui.control import LifecycleControl
    from console.ui.terminal_guard import TerminalGuard

__all__ = ["action_registry", "add_last_resort", "check_keys", "recording_writer_factory", "resolve_settings",
           "run_console", "run_replay", "run_setup"]


def check_keys(config: Config) -> None:
    """The ``[keys]`` table against the action registry (ids, shared keys): one line naming the file
    and the entry. The console commands call it (through ``resolve_settings``) before anything starts."""
    if not config.keys:
        return
    from console.errors import ConfigError
    from console.ui.actions import KeyMapError

    try:
        action_registry(config.keys)
    except KeyMapError as exc:
        raise ConfigError(str(config.path or "config"), f"keys.{exc.action}", exc.problem) from None


def action_registry(keys: Mapping[str, Sequence[str]] | None = None) -> ActionRegistry:
    """Every action of the console, with ``keys`` (``[keys]``) applied: the registry it would run with."""
    from console.ui.app import DeckApp

    return DeckApp(None, keys=keys).registry


def resolve_settings(args: argparse.Namespace, config: Config) -> ConsoleSettings:
    """Command-line flags over the config file's [console] table (and its [keys] checked)."""
    check_keys(config)
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
    return dataclasses.replace(s, **updates)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def install_exit_signals() -> None:
    """Outside the app's loop, SIGTERM/SIGHUP unwind through `finally` (cleanup runs)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)


TerminalLossAction = Callable[[str, float], object]  # (reason, done-by as time.monotonic())


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
    lifecycle: LifecycleControl | None = None,
    pids_of: Callable[[str], tuple[int, ...]] | None = None,
    on_terminal_loss: TerminalLossAction | None = None,
    keys: Mapping[str, Sequence[str]] | None = None,
    hosts: Sequence[HostTarget] = (),
    sources: Sequence[PromTarget | KubeTarget] = (),
) -> str | None:
    """Run the console until quit; returns the app's result ("demo" from the setup screen).

    ``lifecycle``: engine control already built by the caller (the demo); otherwise one is made
    from ``config`` when it has managed engines. ``pids_of``: current process ids per engine.
    ``on_terminal_loss``: what to do with the engines when the terminal is lost (the demo stops
    its simulators); by default ``settings.on_terminal_loss`` applied to ``lifecycle``'s engines.
    ``keys``: the user's ``[keys]`` (``config.keys`` when not given). ``hosts``: remote hosts
    watched over SSH (``console.remote``) beside these engines, their Docker engines controlled
    through forwarded sockets (``control_remote``); their ssh process groups and tunnels end with
    the console, at its hard exit too. ``sources``: Prometheus servers (``console.prometheus``) or
    Kubernetes API servers (``console.kube``) whose engines are shown read-only beside them."""
    from console.alerts.evaluate import evaluator_for
    from console.telemetry.hub import Hub
    from console.ui.input_gate import GATE
    from console.ui.terminal_guard import TerminalGuard

    alerts = evaluator_for(instances)  # a broken rules file: one line, before anything starts
    install_exit_signals()
    # Engine control also serves logs, so it exists in read-only mode too (its actions are refused there).
    if lifecycle is None and config is not None:
        lifecycle = _lifecycle(config, settings)
    local_control, tunnels = lifecycle, None
    if hosts:  # HOST/NAME engines: their host's Docker through a forwarded socket (at the first action)
        from console.remote.tunnel import Tunnels
        from console.ui.control_remote import HostsControl

        tunnels = Tunnels()
        lifecycle = HostsControl(local_control, hosts, tunnels)
    guard = TerminalGuard()
    action = on_terminal_loss or _policy_action(local_control, settings)
    if action is not None:
        guard.add_action(action)
    add_last_resort(guard, local_control)
    if tunnels is not None:
        guard.add_final(tunnels.close_all)  # no ssh tunnel outlives the console, at its hard exit too
    guard.install()
    try:
        local = Hub(instances, refresh=settings.refresh, gpu_source=gpu_source or settings.gpu_source,
                    gpu_assignment=gpu_assignment, pids_of=pids_of or (lifecycle.pids_of if lifecycle else None),
                    lifecycle_phase=lifecycle.phase_of if lifecycle else None, alerts=alerts, foreground=GATE)
        hub: FleetSource = local
        profiles = {i.profile.name: i.profile for i in instances}
        if hosts or sources:
            from console.profiles import load_profiles
            from console.remote.fleet import RemoteFleet

            remote = RemoteFleet(hosts, local=local if instances else None, refresh=settings.refresh,
                                 tunnels=tunnels, sources=sources)
            guard.add_final(remote.kill_streams)
            hub = remote
            profiles = {**load_profiles(), **profiles}  # remote engines may be of any profile
        hub.start()
        # Imported after the hub starts: the first scrapes run while the UI (most of the start-up
        # time) is imported, so the first frame can already show data.
        from console.ui.app import DeckApp, UiOptions

        try:
            app = DeckApp(
                hub,
                options=UiOptions(read_only=settings.read_only, layout=settings.layout, mouse=settings.mouse,
                                  simulated=simulated, title=title, alert_bell=settings.alert_bell,
                                  bench_dir=settings.bench_dir),
                profiles=profiles,
                instances={i.name: i for i in instances},
                lifecycle=lifecycle,
                check_backing=check_backing,
                keys=keys if keys is not None else (config.keys if config is not None else None),
                recording=recording_writer_factory(settings, instances),
            )
            return _run_guarded(app, guard, mouse=settings.mouse)
        finally:
            guard.settle()  # the engine policy finishes before the engine control is closed
            hub.stop()
    finally:
        if lifecycle is not None:
            lifecycle.close()
        guard.close()


def recording_writer_factory(settings: ConsoleSettings, instances: Sequence[EngineInstance]) -> Callable[[], Any]:
    """What the console's REC toggle records into: ``[console] recording_dir`` with its retention,
    every configured secret of these engines masked."""

    def make() -> Any:
        from console.recording import RecordingWriter, default_recording_dir
        from console.secrets import Scrubber, instance_secrets
        from console.timespec import parse_duration, parse_size

        directory = default_recording_dir(settings.recording_dir).expanduser()
        scrubber = Scrubber(s for inst in instances for s in instance_secrets(inst))
        return RecordingWriter(directory, retain_s=parse_duration(settings.record_retain),
                               max_bytes=parse_size(settings.record_max_size), scrubber=scrubber)

    return make


def run_replay(source: ReplaySource, settings: ConsoleSettings, *, profiles: Mapping[str, Any], simulated: bool,
               title: str, keys: Mapping[str, Sequence[str]] | None = None, notices: Sequence[str] = ()) -> None:
    """The console on a ``ReplaySource``: read-only ("replay"), no engine control, its clock the
    recorded time. ``notices`` (what of the recording could not be read) show when it opens."""
    from console.ui.app import DeckApp, UiOptions
    from console.ui.terminal_guard import TerminalGuard

    install_exit_signals()
    guard = TerminalGuard()
    guard.install()
    source.start()
    try:
        app = DeckApp(source, options=UiOptions(read_only=True, read_only_reason="replay", layout=settings.layout,
                                                mouse=settings.mouse, simulated=simulated, title=title,
                                                notices=tuple(notices)),
                      profiles=profiles, clock=source.now, keys=keys)
        _run_guarded(app, guard, mouse=settings.mouse)
    finally:
        source.stop()
        guard.close()


def add_last_resort(guard: TerminalGuard, lifecycle: object | None) -> None:
    """At the hard exit no process group of this console outlives it. Only a console with engine
    control (or with the process backend loaded) has started any; the others (``attach``) leave the
    lifecycle package unimported: about 0.13 s of CPU before the first frame."""
    import sys

    if lifecycle is None and "console.lifecycle.process_backend" not in sys.modules:
        return
    from console.lifecycle.terminal_loss import last_resort

    guard.add_final(last_resort)


def run_setup(settings: ConsoleSettings, config_path: str,
              keys: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """The no-configuration screen; returns "demo" when the user asks for the demo."""
    from console.ui.app import DeckApp, UiOptions
    from console.ui.terminal_guard import TerminalGuard

    app = DeckApp(None, options=UiOptions(layout=settings.layout, mouse=settings.mouse,
                                          setup_config_path=config_path), keys=keys)
    guard = TerminalGuard()
    guard.install()
    try:
        return _run_guarded(app, guard, mouse=settings.mouse)
    finally:
        guard.close()


def _run_guarded(app: DeckApp, guard: TerminalGuard, *, mouse: bool) -> str | None:
    """``app.run`` on ``DeckDriver`` (output that cannot block for good), tied to ``guard``: a lost
    terminal or a failed terminal read or write starts the deadline, which asks the app to leave
    and bounds its output."""
    import time

    from textual.drivers.linux_driver import LinuxDriver

    from console.ui.terminal_driver import DeckDriver, TerminalWriter, install_hooks

    if app.driver_class is LinuxDriver:  # not headless, web or a TEXTUAL_DRIVER of the user's
        app.driver_class = DeckDriver
    install_hooks(guard.begin)
    # Output already queued gets half a second to reach a live terminal; then it is dropped, so
    # nothing waits on a stalled one.
    guard.on_begin(lambda reason: TerminalWriter.give_up_all(time.monotonic() + GIVE_UP_OUTPUT))
    guard.on_begin(lambda reason: app.exit_from_thread())
    guard.output_dropped = lambda: TerminalWriter.dropped
    gc_control.startup_resume()
    try:
        result: str | None = app.run(mouse=mouse)
    finally:
        install_hooks(None)
    crash: BaseException | None = getattr(app, "crash", None)  # DeckApp's; another App has none
    if crash is not None:
        # The engines are left as after a lost terminal (``on_terminal_loss``), the one line is
        # printed, and the exit status says the console failed.
        from console import crashlog

        log = crashlog.write(crash)
        print(crashlog.one_line(crash, log), file=sys.stderr, flush=True)
        guard.begin("the console ended on an internal error", code=crashlog.CRASH_EXIT)
        raise crashlog.ConsoleCrashed(crash, log)
    return result


GIVE_UP_OUTPUT = 0.5  # seconds after shutdown began


def _policy_action(lifecycle: LifecycleControl | None, settings: ConsoleSettings) -> TerminalLossAction | None:
    """``settings.on_terminal_loss`` applied to the engines of ``lifecycle``."""
    if lifecycle is None:
        return None
    policy = settings.on_terminal_loss
    return lambda reason, done_by: lifecycle.on_terminal_loss(policy, reason, done_by)


def _lifecycle(config: Config, settings: ConsoleSettings) -> LifecycleControl | None:
    """Engine control for managed instances (None when none is managed); read-only (``--read-only``
    or ``[console] read_only``) in the manager itself, under the UI's own refusal."""
    if not any(i.managed for i in config.instances):
        return None
    from console.ui.control_lifecycle import ManagerControl

    reason = "" if not settings.read_only else (
        f"[console] read_only = true in {config.path or 'the configuration'}" if config.console.read_only
        else "--read-only")
    return ManagerControl.from_config(config, read_only=reason)

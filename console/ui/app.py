"""The console app: reads FleetSnapshots, dispatches registry actions, picks the layout.

Data flow: the FleetSource collects in its own thread and calls our listener there; the listener
only ``post_message``s a ``FleetUpdated`` (thread-safe). The handler, on the UI loop, stores the
snapshot and hands it to the active screen, which updates only the cells that changed. No HTTP,
NVML or Docker call ever runs here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from textual import on
from textual.app import ScreenStackError
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.events import Event, Key, MouseDown, Resize
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen

from console.config import EngineInstance
from console.model import FleetSnapshot
from console.profiles import EngineProfile
from console.resources import data_dir
from console.telemetry.source import FleetSource
from console.ui import format as fmt
from console.ui.actions import Action, ActionRegistry, display_key
from console.ui.bundle_key import BundleKey
from console.ui.control import LifecycleControl
from console.ui.engine_control import EngineControlApp, control_actions
from console.ui.host import DeckHost, HostApp
from console.ui.host import UiOptions as UiOptions  # re-exported: callers build the app with it
from console.ui.input_gate import GATE
from console.ui.messages import FleetUpdated, LifecycleDone
from console.ui.palette import ActionsProvider
from console.ui.screens import ScreenSpec, screen_specs
from console.ui.screens.base import DeckScreen
from console.ui.timeline import (
    LIVE_ONLY,
    REPLAY_GROUP,
    RecordingControl,
    SeekScreen,
    is_replay,
    recording_actions,
    replay_actions,
    replay_time,
)
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.text_box import is_text_box

if TYPE_CHECKING:
    from console.recording.writer import RecordingWriter

REFRESH_STEPS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# Keys checked before the focused widget: quit must work from a text box and from every pop-up (a
# plain q there is the box's letter, or closes the pop-up). Only keys whose order against the keys
# typed before them does not matter: a priority binding runs before the focused widget has handled
# the keys already queued for it (a fast "down down enter" would open the row the cursor left).
PRIORITY_KEYS = frozenset({"ctrl+q", "alt+q"})
LAYOUT_BASE = "base"  # always loaded; the others are scoped under `.layout-<name>`


def layout_files() -> dict[str, Path]:
    d = data_dir("layouts")
    return {p.stem: p for p in sorted(d.glob("*.tcss"))}


# How many screens are kept for a return at most: a few engines' detail screens and the GPUs.
KEPT_SCREENS = 6


def layout_names() -> list[str]:
    return [n for n in layout_files() if n != LAYOUT_BASE]


def auto_layout(width: int, height: int) -> str:
    if width < 100 or height < 30:
        return "compact"
    if width >= 200 and height >= 50:
        return "wide"
    return "default"


class DeckApp(EngineControlApp, HostApp, inherit_bindings=False):
    """The console: the ``DeckHost`` (console/ui/host.py) of its screens, pop-ups, palette and actions."""

    TITLE = "enginedeck"
    COMMANDS: ClassVar = {ActionsProvider}
    ENABLE_COMMAND_PALETTE = True
    # Our registry owns every key (ctrl+q included: see PRIORITY_KEYS); Textual's own are not inherited.
    BINDINGS: ClassVar = [Binding("ctrl+c", "quit_hint", show=False, system=True)]

    def __init__(
        self,
        source: FleetSource | None,
        *,
        options: UiOptions | None = None,
        profiles: Mapping[str, EngineProfile] | None = None,
        instances: Mapping[str, EngineInstance] | None = None,
        lifecycle: LifecycleControl | None = None,
        clock: Callable[[], float] = time.time,
        check_backing: Callable[[], str | None] | None = None,
        keys: Mapping[str, Sequence[str]] | None = None,
        recording: Callable[[], RecordingWriter] | None = None,
    ) -> None:
        """``keys``: the user's ``[keys]`` (action id -> keys); ``KeyMapError`` when the registry
        cannot take them (``console.ui.launch.check_keys`` says so before anything starts).
        ``recording``: makes the writer the REC toggle (ctrl+r) records into; None: no recording."""
        files = layout_files()
        super().__init__(css_path=list(files.values()))
        self.source = source
        self.options = options or UiOptions()
        self.profiles: Mapping[str, EngineProfile] = profiles or {}
        self.instances: Mapping[str, EngineInstance] = instances or {}
        self.lifecycle = lifecycle
        self.clock = clock
        self.fleet: FleetSnapshot | None = None
        self._alert_states: dict[tuple[str, str], object] = {}
        # Something the data depends on (the demo's simulator fleet): returns why it is gone, or None.
        self.check_backing = check_backing
        self.backing_problem = ""
        self.animation_level = "none"  # no animations by default (SSH, on-call)
        self.layout_name = ""  # the layout in effect
        self.layout_choice = self.options.layout  # "auto" or a layout name
        self._unsubscribe: Callable[[], None] | None = None
        # Screens kept for a return (ScreenSpec.kept), most recently shown last; Textual keeps an
        # installed screen's widgets when it is popped.
        self._kept: OrderedDict[tuple[str, str | None], DeckScreen] = OrderedDict()
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        # Benchmarks: where to note the time of the first frame that shows engine data.
        self._first_frame_file = os.environ.get("ENGINEDECK_FIRST_FRAME_FILE", "")
        self.specs: dict[str, ScreenSpec] = screen_specs()
        self.replay = is_replay(source)
        self.recording_control = (RecordingControl(source, recording, self._notify_from_thread)
                                  if source is not None and recording is not None and not self.replay else None)
        self.registry = ActionRegistry()
        for a in _global_actions(self):
            self.registry.register(a)
        for a in (*replay_actions(), *recording_actions(lambda _: self.toggle_recording())):
            self.registry.register(a)
        for spec in self.specs.values():
            for a in spec.actions:
                self.registry.register(a)
        for a in control_actions(self):
            self.registry.register(a)
        if keys:
            self.registry = self.registry.rebound(keys)
            if any("ctrl+c" in a.key_list for a in self.registry):  # the user's, not the quit hint
                self._bindings.key_to_bindings.pop("ctrl+c", None)
        # The footer lists bindings in the order they were bound: a screen's own keys first, so that
        # at 80 columns they are the ones shown, then the global ones.
        for a in sorted(self.registry, key=lambda a: not a.screens):
            self._bind_action(a)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast, whoever raises it (a screen's ``self.notify`` comes here too): its words often
        hold an engine's name, an error body or a path, so they are shown as text, never as markup,
        with credentials masked and controls made inert."""
        del markup  # no toast of the console uses markup: outside text in one must not act
        super().notify(fmt.shown(message, multiline=True), title=fmt.shown(title), severity=severity,
                       timeout=timeout, markup=False)

    def deck_host(self) -> DeckHost:
        return self

    # -- actions -------------------------------------------------------------------------------

    def _bind_action(self, a: Action) -> None:
        hidden = (self.options.read_only and a.mutating) or (a.group == REPLAY_GROUP and not self.replay)
        for key in a.key_list:
            # Without an explicit display, each key shows itself: in a text box, where the printable
            # keys of an action are the box's, the footer then names the key that still works (f2).
            self._bindings.bind(
                key,
                f"deck('{a.id}')",
                a.short or a.description,
                show=a.footer and not hidden,
                key_display=a.key_display,
                # Quit on any modified key (the user's too) works from a text box and pop-ups.
                priority=a.priority or key in PRIORITY_KEYS or (a.id == "quit" and "+" in key),
            )

    def get_key_display(self, binding: Binding) -> str:
        return binding.key_display or display_key(binding.key)

    def action_quit_hint(self) -> None:
        # ctrl+c is a habit; the terminal is in raw mode, so it arrives as a key: say how to quit.
        keys = self.registry.get("quit").key_list
        if "ctrl+q" in keys and "q" in keys:
            self.notify("ctrl+q quits (q too, outside a text box)", timeout=4)
        else:  # the user's keys ([keys] in config.toml)
            self.notify(f"quit: {display_key(','.join(keys)) or 'no key (the palette, ctrl+p, has it)'}", timeout=4)

    @property
    def screen_name(self) -> str:
        s = self.screen
        return s.deck_name if isinstance(s, DeckScreen) else type(s).__name__

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "deck" and parameters:
            aid = str(parameters[0])
            if aid not in self.registry:
                return False
            if not isinstance(self.screen, DeckScreen) and not isinstance(self.screen, ModalScreen):
                return aid in ("quit", "help", "palette")  # e.g. the setup screen: no data to act on
            a = self.registry.get(aid)
            typing = is_text_box(self.focused)
            if (a.text_box == "outside" and typing) or (
                a.text_box == "inside" and not (typing and isinstance(self.screen, DeckScreen))
            ):
                return False  # the key is the box's (a letter), or there is no box of ours to leave
            return a.available_on(self.screen_name)
        return True

    async def action_deck(self, action_id: str) -> None:
        await self.run_deck_action(action_id)

    async def run_deck_action(self, action_id: str) -> None:
        a = self.registry.get(action_id)
        reason = self.options.read_only_reason or "read-only mode"
        if a.mutating and self.options.read_only:
            self.notify(f"{reason}: {a.description.lower()} is disabled", severity="warning")
            return
        if self.replay and (a.id in LIVE_ONLY or a.id == "record"):
            what = "recording" if a.id == "record" else f"the {a.id} (it talks to live engines)"
            self.notify(f"replay: {what} is disabled", severity="warning")
            return
        if a.group == REPLAY_GROUP and not self.replay:
            self.notify(f"{a.description.split(':')[0].lower()} keys work in a replay (enginedeck replay)")
            return
        if not a.available_on(self.screen_name):
            return
        result = a.handler(self)
        if inspect.isawaitable(result):
            await result

    # -- data ----------------------------------------------------------------------------------

    def _listener(self, snapshot: FleetSnapshot) -> None:
        # Runs in the source's thread: only hand over, never touch widgets here.
        self.post_message(FleetUpdated(snapshot))

    @on(FleetUpdated)
    def _on_fleet(self, message: FleetUpdated) -> None:
        self.fleet = message.snapshot
        self._toast_alert_changes(message.snapshot)
        try:
            screen = self._shown_deck_screen()
        except ScreenStackError:  # the app is closing and its screens are gone
            return
        # A screen being pushed is on top before it has children; it draws the newest snapshot
        # when it is up (on_screen_resume).
        if screen is not None and screen.is_mounted:
            try:
                screen.show_fleet(message.snapshot)
            except NoMatches:
                # Mounted but still composing its children (seen on a loaded machine): the next
                # snapshot, a refresh period away, finds them.
                return
            screen.refresh_top()
        if self._first_frame_file and any(e.total is not None and e.reachable for e in message.snapshot.engines):
            path, self._first_frame_file = self._first_frame_file, ""
            self.call_after_refresh(_write_first_frame, path)

    def _toast_alert_changes(self, snap: FleetSnapshot) -> None:
        """A toast when an alert starts firing or resolves (never for the same state twice), and
        the terminal bell on firing when ``[console] alert_bell`` is on."""
        from console.model import AlertState

        seen = self._alert_states
        fired = False
        for a in snap.alerts:
            key = (a.rule, a.engine)
            before = seen.get(key)
            seen[key] = a.state
            if before is a.state or a.state not in (AlertState.FIRING, AlertState.RESOLVED):
                continue
            if a.state is AlertState.RESOLVED and before is None:
                continue
            firing = a.state is AlertState.FIRING
            fired = fired or firing
            level: Literal["information", "warning", "error"] = (
                ("error" if a.severity == "critical" else "warning") if firing else "information")
            self.notify(f"{a.engine}: {a.summary} ({a.severity}, {a.state.value}); a: alerts", severity=level,
                        timeout=10 if firing else 5)
        if fired and self.options.alert_bell:
            self.bell()

    def _shown_deck_screen(self) -> DeckScreen | None:
        """The screen whose numbers are on view: the top one, or the one under a pop-up (a confirm
        or help box covers part of it, and what shows around the box must not freeze)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, DeckScreen):
                return screen
            if not isinstance(screen, ModalScreen):
                return None
        return None

    @on(LifecycleDone)
    def _on_lifecycle_done(self, message: LifecycleDone) -> None:
        if message.error:
            # The lifecycle's one-line message, as the headless command prints it.
            err = message.error
            text = err if err.startswith(message.engine) else f"{message.engine}: {message.verb} failed: {err}"
            self.notify(text, severity="error", timeout=10)
        else:
            done = {"start": "started, ready", "restart": "restarted, ready", "stop": "stopped"}
            self.notify(f"{message.engine}: {done.get(message.verb, message.verb + ' done')}")

    # -- lifecycle of the app -----------------------------------------------------------------

    # The unhandled error that ended the app (None: it ended normally). ``launch`` writes its traceback
    # to the crash log and exits non-zero with one line naming the log.
    crash: BaseException | None = None

    def _handle_exception(self, error: Exception) -> None:
        # Textual ends the app on any unhandled error and prints a full traceback with locals after
        # the screen is restored, then ``run`` returns as if all went well. Keep the error instead,
        # and drop the traceback from the terminal: it goes to the crash log (console/crashlog.py).
        if self.crash is None:
            self.crash = error
        super()._handle_exception(error)
        self._exit_renderables.clear()

    async def on_mount(self) -> None:
        self._pick_layout(self.size.width, self.size.height)
        # SIGHUP/SIGTERM/SIGINT belong to the terminal guard (console/ui/terminal_guard.py), which
        # calls exit_from_thread; a loop signal handler would not run while the loop is blocked.
        self._ui_loop = asyncio.get_running_loop()
        if self.options.setup_config_path is not None or self.source is None:
            from console.ui.screens.setup import SetupScreen

            await self.push_screen(SetupScreen(self.options.setup_config_path or ""))
            return
        if sys.stdin.isatty():
            self.set_interval(5.0, self._check_tty)  # a dropped SSH session must not leave us spinning
        self.set_interval(2.0, self._watchdog)
        latest = self.source.latest()
        if latest.taken_at > 0:
            self.fleet = latest
        await self.push_screen(self.specs["overview"].factory(self, None))
        self._unsubscribe = self.source.subscribe(self._listener)
        for notice in self.options.notices:
            self.notify(notice, severity="warning", timeout=30)

    def exit_from_thread(self) -> None:
        """From any thread: leave the app as soon as its loop gets to it (never blocks)."""
        loop = self._ui_loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.exit, None)

    def _check_tty(self) -> None:
        try:
            gone = not os.isatty(sys.stdin.fileno())
        except (OSError, ValueError):
            gone = True
        if gone:
            self.exit(None)

    def _watchdog(self) -> None:
        # The top bar says "no new data for N s" when the source itself stops publishing.
        if self.check_backing is not None and not self.backing_problem:
            problem = self.check_backing()
            if problem:
                self.backing_problem = problem
                self.notify(problem, severity="error", timeout=30)
        with contextlib.suppress(ScreenStackError):  # a tick during shutdown, its screens gone
            if isinstance(s := self.screen, DeckScreen):
                s.refresh_top()

    def on_unmount(self) -> None:
        GATE.release()  # its timer dies with this loop: collection must not stay paused
        if self.recording_control is not None:
            self.recording_control.close()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def on_event(self, event: Event) -> None:
        if isinstance(event, Key | MouseDown) and not event.is_forwarded:  # collection steps aside
            GATE.hold(pause_gc=True)
        await super().on_event(event)

    def on_resize(self, event: Resize) -> None:
        self._pick_layout(event.size.width, event.size.height)

    def _pick_layout(self, width: int, height: int) -> None:
        name = self.layout_choice
        if name == "auto" or name not in layout_names():
            name = auto_layout(width, height)
        self.apply_layout(name)

    def apply_layout(self, name: str) -> None:
        if name == self.layout_name:
            return
        for n in layout_names():
            self.set_class(n == name, f"layout-{n}")
        self.layout_name = name
        for screen in self.screen_stack:
            if isinstance(screen, DeckScreen):
                screen.layout_changed(name)
                for footer in screen.query(DeckFooter):
                    footer.refresh()

    # -- navigation ----------------------------------------------------------------------------

    async def show_screen(self, name: str, target: str | None = None) -> None:
        spec = self.specs[name]
        if spec.needs_engine and target is None:
            s = self.screen
            target = s.selected_engine() if isinstance(s, DeckScreen) else None
            if target is None:
                self.notify("select an engine first", severity="warning")
                return
        # Stack: [default, overview, (one detail screen)] + modals on top.
        while len(self.screen_stack) > 2:
            await self.pop_screen()
        if name != "overview":
            await self.push_screen(self._screen_for(spec, target))

    def _screen_for(self, spec: ScreenSpec, target: str | None) -> DeckScreen:
        if not spec.kept:
            return spec.factory(self, target)
        key = (spec.name, target)
        screen = self._kept.get(key)
        if screen is not None:
            self._kept.move_to_end(key)
            if is_text_box(screen.focused):
                screen.set_focus(screen.home_focus())  # no screen opens with the cursor in a text box
            return screen
        screen = spec.factory(self, target)
        self.install_screen(screen, f"kept:{spec.name}:{target or ''}")
        self._kept[key] = screen
        while len(self._kept) > KEPT_SCREENS:
            (old_name, old_target), old = self._kept.popitem(last=False)
            if old in self.screen_stack:  # cannot happen (the stack is cut to the overview first)
                continue
            self.uninstall_screen(f"kept:{old_name}:{old_target or ''}")
            old.remove()
        return screen

    async def go_back(self) -> None:
        s = self.screen
        if isinstance(s, DeckScreen) and s.deck_back():
            return
        if is_text_box(self.focused) and isinstance(s, DeckScreen):
            # Escape first leaves the text box (every plain-letter key works again), then goes back.
            s.set_focus(s.home_focus())
            return
        if len(self.screen_stack) > 2:
            await self.pop_screen()

    def set_paused(self, paused: bool) -> None:
        if self.source is None:
            return
        self.source.set_paused(paused)
        if self.replay:
            self.notify("replay paused" if paused else "replay playing")
        else:
            self.notify("paused: collection stops until you resume" if paused else "resumed")
        s = self.screen
        if isinstance(s, DeckScreen):
            s.refresh_top()

    def step_refresh(self, direction: int) -> None:
        if is_replay(self.source):
            self.notify(f"replay speed {self.source.step_speed(-direction):g}x")
            self.screen_refresh_top()
            return
        if self.source is None:
            return
        cur = self.source.refresh
        if direction > 0:
            new = next((s for s in REFRESH_STEPS if s > cur + 1e-9), REFRESH_STEPS[-1])
        else:
            new = next((s for s in reversed(REFRESH_STEPS) if s < cur - 1e-9), REFRESH_STEPS[0])
        self.source.set_refresh(new)
        self.notify(f"refresh every {new:g} s")
        s = self.screen
        if isinstance(s, DeckScreen):
            s.refresh_top()

    def cycle_layout(self) -> None:
        names = ["auto", *layout_names()]
        cur = self.layout_choice if self.layout_choice in names else "auto"
        nxt = names[(names.index(cur) + 1) % len(names)]
        self.layout_choice = nxt
        self._pick_layout(self.size.width, self.size.height)
        self.notify(f"layout: {nxt}" + (f" ({self.layout_name})" if nxt == "auto" else ""))

    async def open_explain(self) -> None:
        from console.ui.screens.modals import ExplainScreen

        s = self.screen
        if not isinstance(s, DeckScreen):
            return
        metric, engine = s.explain_target()
        snap = self.fleet.engine(engine) if (self.fleet and engine) else None
        profile = self.profiles.get(snap.profile) if snap else None
        text = None
        if metric.startswith("alert:"):
            from console.ui.explain_alert import explain_alert

            rule = metric.removeprefix("alert:")
            alert = next((a for a in (self.fleet.alerts if self.fleet else ()) if a.rule == rule
                          and a.engine == engine), None)
            text = explain_alert(rule, alert, profile)
        elif metric == "phase" and snap is not None and snap.invalid:  # every figure dropped, and why
            from console.ui.explain import explain

            text = explain(metric, profile, engine_name=engine or "", simulated=self.options.simulated)
            text.append("\nInvalid data, shown as n/a (outside its physical range):\n", style="bold")
            for figure in snap.invalid:
                text.append(f"  {figure.describe()}\n")
        elif metric == "tokens_per_joule":  # with this engine's figures and why it is an estimate
            from console.ui.explain_rows import explain_key

            text = explain_key(metric, profile, engine_name=engine or "", simulated=self.options.simulated,
                               energy=snap.energy if snap else None)
        await self.push_screen(ExplainScreen(metric, profile, engine or "", simulated=self.options.simulated,
                                             text=text))

    # -- recording and replay --------------------------------------------------------------------

    @property
    def recording_active(self) -> bool:
        return self.recording_control is not None and self.recording_control.active

    def toggle_recording(self) -> None:
        ctl = self.recording_control
        if ctl is None:
            self.notify("recording is not available here", severity="warning")
            return
        self.run_worker(ctl.toggle, thread=True, group="recording", exclusive=True)

    def _notify_from_thread(self, text: str, error: bool) -> None:
        def show() -> None:
            self.notify(text, severity="error" if error else "information", timeout=10 if error else 5)
            self.screen_refresh_top()

        with contextlib.suppress(RuntimeError):
            self.call_from_thread(show)

    def screen_refresh_top(self) -> None:
        s = self.screen
        if isinstance(s, DeckScreen):
            s.refresh_top()

    async def open_seek(self) -> None:
        src = self.source
        if not is_replay(src):
            self.notify("seek works in a replay (enginedeck replay)")
            return

        def go(text: str | None) -> None:
            if not text:
                return
            try:
                t = replay_time(text, src)
            except ValueError as exc:
                self.notify(str(exc), severity="warning")
                return
            src.seek(t)

        await self.push_screen(SeekScreen(src.span), go)

    async def open_help(self) -> None:
        from console.ui.screens.modals import HelpScreen

        await self.push_screen(HelpScreen(self.registry, read_only=self.options.read_only,
                                          reason=self.options.read_only_reason,
                                          hidden_groups=() if self.replay else (REPLAY_GROUP,),
                                          screen=getattr(self.screen, "deck_name", "")))


def _write_first_frame(path: str) -> None:
    with open(path, "w") as f:
        f.write(f"{time.time():.6f}\n")


def _global_actions(app: DeckApp) -> list[Action]:
    """The app's own actions (handlers act on ``app``, whatever host they are handed)."""

    async def quit_(_: DeckHost) -> None:
        app.exit(None)

    async def help_(_: DeckHost) -> None:
        await app.open_help()

    def palette(_: DeckHost) -> None:
        app.action_command_palette()

    def pause(_: DeckHost) -> None:
        if app.source is not None:
            app.set_paused(not app.source.paused)

    async def back(_: DeckHost) -> None:
        await app.go_back()

    async def explain(_: DeckHost) -> None:
        await app.open_explain()

    return [
        # alt+q: what a terminal sends for esc and q typed quickly (the escape-then-q habit).
        Action("quit", "q,ctrl+q,alt+q", "Quit (ctrl+q also from a text box or a pop-up)", "Global", quit_,
               short="quit"),
        Action("help", "question_mark,f1", "Help: every key", "Global", help_, short="help"),
        Action("palette", "ctrl+p", "Command palette", "Global", palette, footer=False),
        Action("back", "escape", "Back / close", "Global", back, footer=False),
        # Escape in a text box leaves it before the keys typed after it are handled: "esc q" quits.
        Action("leave_box", "escape", "Leave the text box (then every key works)", "Global", back, footer=False,
               text_box="inside", priority=True),
        Action("explain", "e", "Explain the metric under the cursor", "Global", explain, short="explain"),
        Action("pause", "space,p", "Pause / resume collection", "Global", pause, short="pause"),
        Action("faster", "plus,equals_sign", "Refresh faster", "Global", lambda _: app.step_refresh(-1),
               footer=False, key_display="+"),
        Action("slower", "minus", "Refresh slower", "Global", lambda _: app.step_refresh(+1), footer=False),
        Action("layout", "L", "Cycle layout (auto/compact/default/wide)", "Global", lambda _: app.cycle_layout(),
               footer=False),
        Action("overview", "o,1", "Overview: all engines and GPUs", "Navigate",
               lambda host: host.show_screen("overview"), footer=False),
        Action("gpus", "g,3", "GPUs: per-GPU history and processes", "Navigate",
               lambda host: host.show_screen("gpus"), footer=False, short="GPUs", footer_screens=("overview",)),
        Action("replay_seek", "t", "Replay: go to a time ('10m ago', 19:05, -5m)", REPLAY_GROUP,
               lambda _: app.open_seek(), short="seek"),
        BundleKey(app, recording_dir=lambda: app.recording_control.directory if app.recording_control else None
                  ).action(),
    ]

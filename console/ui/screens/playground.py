"""Prompt playground: send a prompt to an engine and watch the reply stream with live timings.

One engine at a time (n or F2 cycles the active engine and keeps the conversation) or split view
(v or F3: the same prompt to two engines at once, side by side, with a summary of the differences).
Every request goes to the history with its timings and the engine's state at that moment (running,
waiting, KV usage from the fleet snapshot). Copy the last request as curl (c/F4; the API key appears
as ``$ENV_NAME``) or JSON (j/F5), or the reply (r/F6), through OSC 52.

The screen opens with the reply focused, not the prompt, so every letter key works; ``i`` (or tab)
goes to the prompt, Escape leaves it. In the prompt the F-keys still work.

Requests use the same streaming client as the load generator (``console.client``), on the app's
event loop; the logic lives in ``console.client.playground``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Static

from console.client.playground import (
    Conversation,
    ModelCache,
    Turn,
    as_curl,
    as_json,
    compare,
    gaps_ms,
    live_stats,
    parse_params,
    send_turn,
)
from console.client.stream import GenParams
from console.client.timing import RequestRecord
from console.model import FleetSnapshot
from console.secrets import mask_url
from console.target import EngineTarget
from console.transport.http import Cancellable
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar, console_engines
from console.ui.widgets.cell_table import CellTable
from console.ui.widgets.chart import spark
from console.ui.widgets.footer import DeckFooter

if TYPE_CHECKING:
    from textual.widgets import Markdown

REFRESH_S = 0.1  # reply/markdown redraw at most 10 times a second


class _Pane(Vertical):
    """One engine's reply: title, streaming Markdown, live stats with an ITL sparkline."""

    DEFAULT_CSS = """
    _Pane { width: 1fr; height: 1fr; border: round $panel; }
    _Pane .pane-title { height: 1; text-style: bold; }
    _Pane .pane-stats { height: 2; text-wrap: nowrap; text-overflow: ellipsis; }
    _Pane VerticalScroll { height: 1fr; }
    _Pane VerticalScroll:focus { background: $boost; }
    """

    def __init__(self, pane_id: str) -> None:
        super().__init__(id=pane_id)
        self.record: RequestRecord | None = None
        # The engine whose reply and timings the pane shows: its title names it, whatever engine
        # the next prompt goes to (n moves that on, never what the pane shows).
        self.engine: str | None = None
        self._target: str | None = None  # the engine the next prompt goes to (the title names it)
        self._shown = -1

    def compose(self) -> ComposeResult:
        # Textual's Markdown brings markdown-it and a highlighter (~50 ms): imported when a
        # playground opens, not at every start of the console.
        from textual.widgets import Markdown

        yield Static(classes="pane-title")
        with VerticalScroll():
            yield Markdown(classes="reply")
        yield Static(classes="pane-stats")

    def set_title(self, target: str) -> None:
        """Title the pane for ``target``, the engine its next prompt goes to."""
        self._target = target
        shown = self.engine or target
        t = Text()
        t.append(shown, style="bold")
        if self.engine is not None and self.engine != target:
            note = f" · its last reply; next prompt → {target}"
            if len(shown) + len(note) > self.content_region.width:  # a narrow pane keeps both names
                note = f" · next → {target}"
            t.append(note, style="dim")
        self.query_one(".pane-title", Static).update(fmt.shown_text(t))

    def on_resize(self) -> None:
        if self._target is not None:
            self.set_title(self._target)

    async def redraw(self, transcript: str) -> None:
        rec = self.record
        if rec is None:
            return
        size = len(rec.text) + len(rec.reasoning)
        if size != self._shown:
            self._shown = size
            reasoning = f"> *thinking:* {rec.reasoning.strip()}\n\n" if rec.reasoning else ""
            reply = cast("Markdown", self.query_one(".reply"))
            # The engine's words (and a reply it wrote before) as text: escapes and controls inert,
            # credentials masked, line ends kept; Markdown still formats what is left.
            await reply.update(fmt.shown(transcript + reasoning + rec.text, multiline=True))
            # Follow the end once the new text is laid out (before that the end is not known yet).
            scroll = self.query_one(VerticalScroll)
            scroll.call_after_refresh(scroll.scroll_end, animate=False)
        self.query_one(".pane-stats", Static).update(
            fmt.shown_text(stats_text(rec, max(10, min(40, self.size.width - 22))), multiline=True))


def stats_text(rec: RequestRecord, spark_width: int = 40) -> Text:
    # A finished reply's speed is up to its end, not up to now (it would sink while you read it).
    st = live_stats(rec, rec.t_done_ns if rec.t_done_ns is not None else time.perf_counter_ns())
    t = Text()
    ttft = st["ttft_ms"]
    t.append(f"TTFT {ttft:.0f} ms" if ttft is not None else "TTFT …", style="bold")
    tps = st["tok_s"]
    t.append(f"   {tps:.1f} tok/s" if tps is not None else "   — tok/s")
    t.append(f"   {st['tokens']:.0f} tokens")
    if rec.prompt_tokens is not None:
        t.append(f"   prompt {rec.prompt_tokens}")
    if rec.error:
        t.append(f"   {rec.error}", style="bold red")
    elif rec.cancelled:
        t.append("   cancelled", style="yellow")
    elif rec.finish_reason:
        t.append(f"   finish: {rec.finish_reason}")
    gaps = gaps_ms(rec)
    t.append("\nITL ")
    t.append(spark(gaps, spark_width) if gaps else "", style="cyan")
    if gaps:
        t.append(f" last {gaps[-1]:.1f} ms")
    return t


class PlaygroundScreen(DeckScreen):
    deck_name = "playground"
    deck_title = "Playground"
    # Never open (or come back) with the focus in a text box: its letters would be the box's.
    AUTO_FOCUS = "#pane-a VerticalScroll"

    # The reply gets the rows: one-line labelled fields, a short history, a one-line prompt. At 80x24
    # that leaves 12 lines of reply (10 with a split summary); layouts/compact.tcss drops the borders.
    DEFAULT_CSS = """
    PlaygroundScreen #pg-engine { height: 1; }
    PlaygroundScreen #pg-controls { height: 1; }
    PlaygroundScreen #pg-controls Label { width: auto; padding: 0 1; color: $text-muted; }
    PlaygroundScreen #pg-controls Input { width: 1fr; height: 1; border: none; padding: 0 1; background: $boost; }
    PlaygroundScreen #pg-controls #pg-system { width: 1fr; }
    PlaygroundScreen #pg-controls #pg-params { width: 32; }
    PlaygroundScreen #pg-panes { height: 1fr; }
    PlaygroundScreen #pg-summary { height: auto; max-height: 3; padding: 0 1; }
    PlaygroundScreen #pg-history { height: 6; }
    PlaygroundScreen #pg-prompt { height: 3; }
    """

    def __init__(self, app: DeckHost, target: str | None) -> None:
        super().__init__()
        self.engines = console_engines(app)
        self.active = 0
        if target is not None:
            self.active = next((i for i, e in enumerate(self.engines) if e.name == target), 0)
        self.split = False
        self.conversation = Conversation()
        self.models = ModelCache()
        self.history: list[Turn] = []
        self._cancels: list[Cancellable] = []
        self._streaming = False
        self._transcripts: dict[str, str] = {}  # per engine: the conversation shown above its streaming reply

    # -- layout ------------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield Static(id="pg-engine")
        with Horizontal(id="pg-controls"):
            yield Label("system")
            yield Input(placeholder="system prompt", id="pg-system")
            yield Label("params")
            yield Input(value="max_tokens=256 temperature=0.7", placeholder="max_tokens=256 temperature=0.7",
                        id="pg-params")  # fmt: skip
            yield Label("model")
            yield Input(placeholder="auto: first served", id="pg-model")
        with Horizontal(id="pg-panes"):
            yield _Pane("pane-a")
            yield _Pane("pane-b")
        yield Static(id="pg-summary")
        t: DataTable[str] = CellTable(id="pg-history", cursor_type="row")
        yield t
        yield Input(placeholder="prompt: i or tab to type, Enter sends, esc leaves the box", id="pg-prompt")
        yield DeckFooter()

    def on_mount(self) -> None:
        t = self.query_one("#pg-history", DataTable)
        # Fixed widths (a row that comes later never shifts the columns) that fit 80 columns: the
        # engine's state at send time is one column, running/waiting/KV; the status takes the rest.
        name_w = max([6, *(len(e.name) for e in self.engines)])
        widths = [8, min(name_w, 16), 7, 7, 5, 4, 6, 8]
        labels = ("time", "engine", "TTFT ms", "TPOT ms", "tok/s", "N", "E2E ms", "r/w/KV")
        for label, w in zip(labels, widths, strict=True):
            t.add_column(label, width=w)
        t.add_column("status", width=max(6, self.app.size.width - sum(widths) - 2 * (len(widths) + 1) - 2))
        self.query_one("#pane-b", _Pane).display = False
        self.query_one("#pg-summary", Static).display = False
        self._draw_engine_line()
        self.set_interval(REFRESH_S, self._tick)

    def home_focus(self) -> Widget:
        """Where Escape from a text box puts the focus: the reply (arrows scroll it)."""
        return self.query_one("#pane-a VerticalScroll", VerticalScroll)

    def explain_target(self) -> tuple[str, str | None]:
        return ("playground", self.current.name if self.engines else None)

    def focus_prompt(self) -> None:
        # At once, not after the keys already queued: "i" then fast typing is all prompt, no command.
        self.set_focus(self.query_one("#pg-prompt", Input))

    def title_text(self) -> str:
        return f"Playground · {self.current.name}" if self.engines else "Playground"

    @property
    def current(self) -> EngineTarget:
        return self.engines[self.active % len(self.engines)]

    @property
    def other(self) -> EngineTarget:
        return self.engines[(self.active + 1) % len(self.engines)]

    def _draw_engine_line(self) -> None:
        t = Text()
        if not self.engines:
            t.append("no engine configured: add one to config.toml, or start `enginedeck demo`", style="bold red")
        else:
            t.append("engine ", style="dim")
            t.append(self.current.name, style="bold")
            t.append(f" ({self.current.profile.display_name} at {mask_url(self.current.url)})")
            if self.split and len(self.engines) > 1:
                t.append(" vs ", style="dim")
                t.append(self.other.name, style="bold")
            n = len(self.conversation.messages) // 2
            t.append(f" · {n} exchange{'' if n == 1 else 's'} kept", style="dim")
        self.query_one("#pg-engine", Static).update(fmt.shown_text(t))
        a = self.query_one("#pane-a", _Pane)
        a.set_title(self.current.name if self.engines else "")
        b = self.query_one("#pane-b", _Pane)
        b.display = self.split
        if self.split and self.engines:
            b.set_title(self.other.name)
        self.refresh_top()

    # -- actions -----------------------------------------------------------------------------------------------

    def cycle_engine(self) -> None:
        if not self.engines:
            return
        self.active = (self.active + 1) % len(self.engines)
        self._draw_engine_line()
        self.notify(f"active engine: {self.current.name} (conversation kept)")

    def compare_pair(self) -> tuple[str, str] | None:
        """The split view's two engines (A/B compare of their charts); outside it, the current and the next."""
        if len(self.engines) < 2:
            return None
        return (self.current.name, self.other.name)

    def toggle_split(self) -> None:
        if len(self.engines) < 2:
            self.notify("split view needs two engines", severity="warning")
            return
        self.split = not self.split
        self._draw_engine_line()

    def cancel(self) -> None:
        for c in self._cancels:
            c.cancel()

    def clear(self) -> None:
        self.conversation.clear()
        self._draw_engine_line()

    def copy_source(self) -> str:
        """Whose last request a copy takes: the engine whose reply the focused pane shows (in split
        view tab moves to the right one); before any reply, the engine the pane's next prompt goes to."""
        if self.split and len(self.engines) > 1 and self.query_one("#pane-b", _Pane).has_focus_within:
            return self.query_one("#pane-b", _Pane).engine or self.other.name
        return self.query_one("#pane-a", _Pane).engine or self.current.name

    def copy(self, what: str) -> None:
        if not self.history:
            self.notify("nothing sent yet", severity="warning")
            return
        engine = self.copy_source()
        turn = next((t for t in reversed(self.history) if t.engine == engine), self.history[-1])
        text = {"curl": as_curl, "json": as_json}.get(what, lambda t: t.reply)(turn)
        self.app.copy_to_clipboard(text)
        label = {"curl": "request as curl", "json": "request as JSON"}.get(what, "reply")
        # OSC 52 hands the text to the terminal; whether the clipboard gets it is the terminal's
        # (and tmux's) setting, which the console cannot see.
        self.notify(f"{turn.engine}: last {label} ({len(text)} characters) sent to the terminal (OSC 52); "
                    "if nothing pastes, the terminal does not allow OSC 52 copies", timeout=8)  # fmt: skip

    # -- sending -----------------------------------------------------------------------------------------------

    @on(Input.Submitted, "#pg-prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text or not self.engines:
            return
        if self._streaming:
            self.notify("a reply is still streaming (F8 cancels it; x outside the prompt)", severity="warning")
            return
        try:
            params = parse_params(self.query_one("#pg-params", Input).value)
        except ValueError as exc:
            self.notify(f"params: {exc}", severity="error")
            return
        event.input.value = ""
        self.conversation.system = self.query_one("#pg-system", Input).value.strip()
        self._send(text, params)

    def _engine_state(self, name: str) -> dict[str, Any]:
        fleet = self.deck.fleet
        snap = fleet.engine(name) if fleet else None
        if snap is None or snap.total is None:
            return {}
        return {"running": snap.total.running, "waiting": snap.total.waiting, "kv_usage": snap.total.kv_usage}

    @work(exclusive=True, group="playground")
    async def _send(self, text: str, params: GenParams) -> None:
        import asyncio

        engines = [self.current, self.other] if self.split and len(self.engines) > 1 else [self.current]
        panes = [self.query_one("#pane-a", _Pane), self.query_one("#pane-b", _Pane)]
        messages = self.conversation.request_messages(text)
        transcripts = {e.name: _transcript(self.conversation, text, e.name) for e in engines}
        self._cancels = [Cancellable() for _ in engines]
        self._streaming = True
        self._transcripts = transcripts
        try:
            model_override = self.query_one("#pg-model", Input).value.strip()
            models = []
            for e in engines:
                try:
                    models.append(model_override or (await self.models.models(e))[0])
                except Exception as exc:  # one line for the user, never a traceback
                    self.notify(f"{e.name}: {exc}", severity="error")
                    return
            for pane in panes:
                pane.record = None
            for pane, e in zip(panes, engines, strict=False):
                pane.engine = e.name
            self._draw_engine_line()
            coros = []
            for i, e in enumerate(engines):
                rec_holder = panes[i]

                def on_token(rec: RequestRecord, c: str, r: str, t: int, pane: _Pane = rec_holder) -> None:
                    pane.record = rec

                coros.append(send_turn(e, models[i], messages, params, on_token=on_token, cancel=self._cancels[i],
                                       engine_state=self._engine_state(e.name)))  # fmt: skip
            turns: Sequence[Turn] = await asyncio.gather(*coros)
        finally:
            self._streaming = False
        await self.show_turns(text, turns, transcripts)

    async def show_turns(self, text: str, turns: Sequence[Turn], transcripts: Mapping[str, str]) -> None:
        """The finished request(s): final replies and stats, history rows, the split summary."""
        panes = [self.query_one("#pane-a", _Pane), self.query_one("#pane-b", _Pane)]
        for pane, turn in zip(panes, turns, strict=False):
            pane.record, pane.engine = turn.record, turn.engine
            await pane.redraw(transcripts.get(turn.engine, ""))
        for turn in turns:
            self.history.append(turn)
            self._add_history_row(turn)
        first = turns[0]
        if first.record.ok:
            self.conversation.add_exchange(text, first.reply, first.engine)
        summary = self.query_one("#pg-summary", Static)
        summary.update(fmt.outside(" · ".join(compare(turns[0], turns[1])) if len(turns) == 2 else ""))
        summary.display = len(turns) == 2
        self._draw_engine_line()

    async def _tick(self) -> None:
        if not self._streaming:
            return
        for pane in (self.query_one("#pane-a", _Pane), self.query_one("#pane-b", _Pane)):
            if pane.display and pane.record is not None:
                await pane.redraw(self._transcripts.get(pane.engine or "", ""))

    def _add_history_row(self, turn: Turn) -> None:
        m = turn.metrics
        st = turn.engine_state

        def f(v: float | None, spec: str = ".0f") -> str:
            return "n/a" if v is None else format(v, spec)

        status = turn.record.error or ("cancelled" if turn.record.cancelled else (turn.record.finish_reason or "ok"))
        kv = st.get("kv_usage")
        state = f"{f(st.get('running'))}/{f(st.get('waiting'))}/{'n/a' if kv is None else f'{kv:.0%}'}"
        table = self.query_one("#pg-history", DataTable)
        table.add_row(
            time.strftime("%H:%M:%S", time.localtime(turn.started_at)), turn.engine,
            f(m.ttft_ms if m else None), f(m.tpot_ms if m else None, ".1f"), f(m.decode_tok_s if m else None, ".1f"),
            f(m.output_tokens if m else None), f(m.e2e_ms if m else None), state, status[:40],
        )  # fmt: skip
        table.call_after_refresh(table.scroll_end, animate=False)  # the newest exchange in view

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        if not self.engines:
            self.engines = console_engines(self.deck)
            if self.engines:
                self._draw_engine_line()


def _transcript(conversation: Conversation, user: str, engine: str) -> str:
    """The conversation as ``engine``'s pane shows it above its reply. A reply another engine wrote
    (the conversation went on after ``n``; in split view both engines get the first one's replies as
    context) is labelled with the engine that wrote it."""
    authors = iter(conversation.authors)
    labelled = []
    for m in conversation.messages:
        if m.get("role") == "user":
            labelled.append(f"**you**: {m.get('content', '')}")
        else:
            author = next(authors, "")
            who = f"**assistant · {author}, sent as context**" if author and author != engine else "**assistant**"
            labelled.append(f"{who}: {m.get('content', '')}")
    parts = labelled[-6:]  # the last exchanges, for context
    parts.append(f"**you**: {user}")
    return "\n\n".join(parts) + "\n\n**assistant**: "


def _on_pg(fn: Callable[[PlaygroundScreen], None]) -> Callable[[DeckHost], None]:
    def handler(app: DeckHost) -> None:
        s = app.screen
        if isinstance(s, PlaygroundScreen):
            fn(s)

    return handler


def _screen(app: DeckHost, target: str | None) -> PlaygroundScreen:
    return PlaygroundScreen(app, target)


SCREENS = ("playground",)
ACTIONS: tuple[Action, ...] = (
    Action("playground", "P,4", "Playground: stream a prompt, timings, A/B split", "Navigate",
           lambda app: app.show_screen("playground"), footer=False, short="play", footer_screens=("overview",)),
    # Every F-key has a plain letter too (F-keys get lost over SSH, tmux and laptop keyboards); the
    # letters work outside the prompt, the F-keys also inside it.
    Action("pg_prompt", "i", "Playground: type a prompt (Enter sends, esc leaves the box)", "Playground",
           _on_pg(lambda s: s.focus_prompt()), screens=SCREENS, short="prompt", text_box="outside", priority=True),
    Action("pg_cycle", "n,f2", "Playground: next engine (keeps the conversation)", "Playground",
           _on_pg(lambda s: s.cycle_engine()), screens=SCREENS, short="engine"),
    Action("pg_split", "v,f3", "Playground: split view, same prompt to two engines", "Playground",
           _on_pg(lambda s: s.toggle_split()), screens=SCREENS, short="split"),
    Action("pg_curl", "c,f4", "Playground: copy the last request as curl", "Playground",
           _on_pg(lambda s: s.copy("curl")), screens=SCREENS, short="curl"),
    Action("pg_json", "j,f5", "Playground: copy the last request as JSON", "Playground",
           _on_pg(lambda s: s.copy("json")), screens=SCREENS, short="json", footer=False),
    Action("pg_reply", "r,f6", "Playground: copy the last reply", "Playground", _on_pg(lambda s: s.copy("reply")),
           screens=SCREENS, short="reply"),
    Action("pg_clear", "C,f7", "Playground: clear the conversation", "Playground", _on_pg(lambda s: s.clear()),
           screens=SCREENS, short="clear", footer=False),
    Action("pg_cancel", "x,f8", "Playground: cancel the streaming reply", "Playground", _on_pg(lambda s: s.cancel()),
           screens=SCREENS, short="cancel"),
)

register_screen(ScreenSpec("playground", "Playground", _screen, ACTIONS))

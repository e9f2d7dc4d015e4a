"""The footer: one line of keys, cut at whole keys, drawn by one widget.

Textual's footer is a container with a widget per key, rebuilt (mounted and styled anew) on every
screen change and every focus change: with a dozen keys that was a large share of a key's way to
the next screen. This one is a single widget that works out its keys when the screen's bindings
change and draws them as one line of text, so a change costs one line's render.

Keys that do not fit are left out, never clipped mid-word ("? h"). The app binds a screen's own keys
before the global ones, so at 80 columns the keys that matter on that screen are the ones shown;
help (?) lists every key. A click on a key presses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget

from console.ui.actions import display_key
from console.ui.host import host_of
from console.ui.widgets.text_box import is_text_box


@dataclass(frozen=True, slots=True)
class FooterItem:
    """One key as the footer shows it."""

    key: str  # the binding's key: what a click presses
    key_display: str
    description: str
    enabled: bool = True
    action: str = ""


def _types(key: str) -> bool:
    """Whether a text box takes this key as a character."""
    shown = display_key(key)
    return len(shown) == 1 and shown.isprintable()


def key_width(item: FooterItem, gap: int) -> int:
    """Columns one key takes: its key, its description and the padding around them."""
    return len(item.key_display) + len(item.description) + gap


class DeckFooter(Widget):
    COMPONENT_CLASSES = {"footer-key--key", "footer-key--description", "footer-key--separator"}
    DEFAULT_CSS = """
    DeckFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .footer-key--separator { color: $foreground 20%; }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._items: list[FooterItem] = []
        self._palette: FooterItem | None = None
        # (start column, end column, item) of each key drawn, for clicks.
        self._spans: list[tuple[int, int, FooterItem]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.refresh_keys()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh_keys()

    def on_resize(self, event: events.Resize) -> None:
        self.refresh()

    # -- which keys ----------------------------------------------------------------------------

    def refresh_keys(self) -> None:
        """Work out the keys from the screen's active bindings (focus or screen changed)."""
        screen = self.screen
        active = screen.active_bindings
        typing = is_text_box(screen.focused)
        items: list[FooterItem] = []
        seen: set[str] = set()
        for _node, binding, enabled, _tooltip in active.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            # Textual keeps / + - bindings listed in a text box (it has no character for those key
            # names), but there they type: leave them out as it does q or ?.
            if typing and _types(binding.key):
                continue
            items.append(FooterItem(binding.key, self.app.get_key_display(binding), binding.description,
                                    enabled, binding.action))
        items += self._shadowed()
        items += self._named_here([i.action for i in items])
        items.sort(key=self._rank)
        self._palette = None
        if self.app.ENABLE_COMMAND_PALETTE:
            found = active.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _node, binding, enabled, _tooltip = found
                self._palette = FooterItem(binding.key, self.app.get_key_display(binding), binding.description,
                                           enabled, binding.action)
                items = [i for i in items if i.action != binding.action]
        self._items = items
        self.refresh()

    def _shadowed(self) -> list[FooterItem]:
        """Screen keys whose key the focused widget also binds, hidden: the overview table's own
        enter (select the cell) is what opens the engine, so the footer shows "⏎ detail" for it."""
        host = host_of(self.app)
        if host is None or is_text_box(self.screen.focused):
            return []  # in a text box its keys are its own (enter submits the box)
        screen = getattr(self.screen, "deck_name", "")
        active = self.screen.active_bindings
        out: list[FooterItem] = []
        for a in host.registry:
            if not a.footer or not a.screens or not a.available_on(screen):
                continue
            for key in (k.strip() for k in a.keys.split(",")):
                taken = active.get(key)
                if taken is not None and not taken.binding.show and taken.node is not self.app:
                    shown = a.key_display or display_key(key)
                    out.append(FooterItem(key, shown, a.short or a.description, True, f"deck('{a.id}')"))
                    break
        return out

    def _named_here(self, present: list[str]) -> list[FooterItem]:
        """Actions this screen's footer names although they are not footer keys elsewhere (the
        overview's keys of the GPUs, playground, bench and alerts screens)."""
        host = host_of(self.app)
        if host is None or is_text_box(self.screen.focused):
            return []
        screen = getattr(self.screen, "deck_name", "")
        out = []
        for a in host.registry:
            action = f"deck('{a.id}')"
            if screen in a.footer_screens and a.key_list and action not in present:
                out.append(FooterItem(a.key_list[0], display_key(a.key_list[0]), a.short or a.description, True,
                                      action))
        return out

    def _rank(self, item: FooterItem) -> tuple[int, int, int]:
        """By the action's footer rank, then a screen's own keys, the screens it names, the global ones,
        each in registry order (not in the order Textual met the key: `r` is bound by the playground
        and the bench)."""
        host = host_of(self.app)
        if host is None or not item.action.startswith("deck('"):
            return (0, 3, 0)
        registry = host.registry
        aid = item.action[len("deck('") : -len("')")]
        order = [a.id for a in registry]
        if aid not in order:
            return (0, 3, 0)
        a = registry.get(aid)
        tier = 0 if a.screens else 1 if a.footer_screens else 2
        return (a.footer_rank, tier, order.index(aid))

    # -- drawing -------------------------------------------------------------------------------

    def _gap(self) -> int:
        # The compact layout (80 columns) pads one column less around each key.
        host = host_of(self.app)
        return 2 if host is not None and host.layout_name == "compact" else 3

    def shown(self) -> list[FooterItem]:
        """The keys drawn at the current width, in order, the palette key last."""
        width = self.size.width or self.app.size.width
        gap = self._gap()
        budget = width - (key_width(self._palette, gap) + 2 if self._palette is not None else 0)
        out: list[FooterItem] = []
        for item in self._items:
            need = key_width(item, gap)
            if need > budget:
                break  # the rest would be clipped: leave them out, in order of importance
            budget -= need
            out.append(item)
        if self._palette is not None:
            out.append(self._palette)
        return out

    def _styles(self, item: FooterItem) -> tuple[Style, Style]:
        key_style = self.get_component_rich_style("footer-key--key")
        desc_style = self.get_component_rich_style("footer-key--description")
        if not item.enabled:
            key_style += Style(dim=True)
            desc_style += Style(dim=True)
        return key_style, desc_style

    def _key_text(self, item: FooterItem, compact: bool) -> Text:
        key_style, desc_style = self._styles(item)
        if compact:
            return Text.assemble((f" {item.key_display}", key_style), (f" {item.description}", desc_style))
        return Text.assemble((f" {item.key_display} ", key_style), (f"{item.description} ", desc_style))

    def render(self) -> Text:
        width = self.size.width
        compact = self._gap() == 2
        shown = self.shown()
        line = Text(no_wrap=True, overflow="crop", end="")
        self._spans = []
        keys = [i for i in shown if i is not self._palette]
        for item in keys:
            start = line.cell_len
            line.append_text(self._key_text(item, compact))
            self._spans.append((start, line.cell_len, item))
        if self._palette is not None:
            # As Textual draws its palette key: a rule, the key (one space before it in the compact
            # layout, none otherwise), one space, the description, one space.
            p = self._palette
            key_style, desc_style = self._styles(p)
            tail = Text.assemble(
                ("▏", self.get_component_rich_style("footer-key--separator")),
                ((" " if compact else "") + p.key_display, key_style),
                (f" {p.description}", desc_style),
                " ",
            )
            pad = max(0, width - line.cell_len - tail.cell_len)
            line.append(" " * pad)
            start = line.cell_len
            line.append_text(tail)
            self._spans.append((start, line.cell_len, self._palette))
        return line

    def on_click(self, event: events.Click) -> None:
        for start, end, item in self._spans:
            if start <= event.x < end:
                if item.enabled:
                    self.app.simulate_key(item.key)
                else:
                    self.app.bell()
                return

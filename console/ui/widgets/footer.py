"""The footer, cut at whole keys.

Textual's footer clips at the right edge, mid-word ("? h"). This one leaves out the keys that do
not fit. The app binds a screen's own keys before the global ones, so at 80 columns the keys that
matter on that screen are the ones shown; help (?) lists every key.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer, Input, TextArea
from textual.widgets._footer import FooterKey

from console.ui.actions import display_key
from console.ui.host import host_of


def _types(key: str) -> bool:
    """Whether a text box takes this key as a character."""
    shown = display_key(key)
    return len(shown) == 1 and shown.isprintable()


def key_width(key: FooterKey, gap: int) -> int:
    """Columns one key takes: its key, its description and the padding around them."""
    return len(key.key_display) + len(key.description) + gap


class DeckFooter(Footer):
    def __init__(self) -> None:
        super().__init__()
        self._width = 0

    def compose(self) -> ComposeResult:
        width = self.app.size.width
        host = host_of(self.app)
        # layouts/compact.tcss pads one column less around each key.
        gap = 2 if host is not None and host.layout_name == "compact" else 3
        typing = isinstance(self.screen.focused, Input | TextArea)
        widgets: list[Widget] = [
            w
            for w in super().compose()
            # Textual keeps / + - bindings listed in a text box (it has no character for those key
            # names), but there they type: leave them out as it does q or ?.
            if not (typing and isinstance(w, FooterKey) and _types(w.key))
        ]
        widgets += self._shadowed()
        widgets.sort(key=self._rank)
        palette = [w for w in widgets if w.has_class("-command-palette")]
        budget = width - sum(key_width(w, gap) + 2 for w in palette if isinstance(w, FooterKey))
        for w in widgets:
            if w in palette:
                continue
            if isinstance(w, FooterKey):
                need = key_width(w, gap)
                if need > budget:
                    break  # the rest would be clipped: leave them out, in order of importance
                budget -= need
            yield w
        yield from palette

    def _shadowed(self) -> list[Widget]:
        """Screen keys whose key the focused widget also binds, hidden: the overview table's own
        enter (select the cell) is what opens the engine, so the footer shows "⏎ detail" for it."""
        host = host_of(self.app)
        if host is None or isinstance(self.screen.focused, Input | TextArea):
            return []  # in a text box its keys are its own (enter submits the box)
        screen = getattr(self.screen, "deck_name", "")
        active = self.screen.active_bindings
        out: list[Widget] = []
        for a in host.registry:
            if not a.footer or not a.screens or not a.available_on(screen):
                continue
            for key in (k.strip() for k in a.keys.split(",")):
                taken = active.get(key)
                if taken is not None and not taken.binding.show and taken.node is not self.app:
                    shown = a.key_display or display_key(key)
                    fk = FooterKey(key, shown, a.short or a.description, f"deck('{a.id}')")
                    out.append(fk.data_bind(compact=Footer.compact))
                    break
        return out

    def _rank(self, w: Widget) -> tuple[int, int]:
        """A screen's own keys first, then the global ones, each in registry order (not in the order
        Textual met the key: `r` is bound by the playground and the bench)."""
        host = host_of(self.app)
        action = w.action if isinstance(w, FooterKey) else ""
        if host is None or not action.startswith("deck('"):
            return (2, 0)
        registry = host.registry
        aid = action[len("deck('") : -len("')")]
        order = [a.id for a in registry]
        if aid not in order:
            return (2, 0)
        return (0 if registry.get(aid).screens else 1, order.index(aid))

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)

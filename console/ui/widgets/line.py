"""A cheap text widget for values that change every refresh.

``Static.update`` asks for a full layout pass each time; for a widget whose size does not change
that is wasted work every second. ``Line.show`` redraws only when the text changed, and only
asks for layout when the number of lines changed.

Text whose every line fits the width is drawn line by line from its own segments: Textual's
general path converts it to Content, wraps and re-formats every line and simplifies every strip,
about 4x the work for the overview's charts and GPU table, which change every second. Anything
else (a line that must wrap, tabs, justification, links or click actions) takes Textual's path.
"""

from __future__ import annotations

from rich import get_console
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from console.ui.format import shown_text


def text_key(text: Text) -> tuple[object, ...]:
    """What drawing ``text`` depends on, to tell a changed text from the same one: its words, style,
    spans and layout settings as they are. ``Text.markup`` told it before, but it escapes and
    rebuilds the whole text on every call (15-45 us for a table cell, docs/performance.md)."""
    return (text.plain, text.style, tuple(text.spans), text.justify, text.overflow, text.no_wrap, text.end)


def _offset(x: int, y: int) -> Style:
    return Style.from_meta({"offset": (x, y)})


def _plain_lines(text: Text, width: int, console: Console | None = None) -> list[list[Segment]] | None:
    """The lines of ``text`` as segments, when each can be drawn as it is at ``width``; else None.

    The whole text is rendered once and cut at its line ends: splitting it into a ``Text`` a line
    and rendering each (as before) cost 1.7-3x as much for the overview's trends and GPU table,
    whose every line changes every second (docs/performance.md)."""
    if text.justify not in (None, "default", "left") or "\t" in text.plain:
        return None
    for style in (text.style, *(span.style for span in text.spans)):
        if isinstance(style, str):
            if "$" in style or "@" in style or "link" in style:
                return None  # Textual's variables, actions and links: its path resolves them
        elif style.link or style._meta:
            return None
    lines = list(Segment.split_lines(text.render(console or get_console(), end="")))
    if not lines or text.plain.endswith("\n"):
        lines.append([])  # split_lines yields no last, empty line: Text.split("\n", allow_blank) does
    for line in lines:
        if sum(cell_len(chunk) for chunk, _, _ in line) > width:
            return None
    return lines


class Line(Widget):
    DEFAULT_CSS = """
    Line { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._content: RenderableType = Text("")
        self._key: object = None
        self._lines = 1
        self._version = 0
        self._strips: tuple[tuple[int, int, Style], list[Strip] | None] | None = None

    @property
    def content(self) -> RenderableType:
        return self._content

    def show(self, content: RenderableType, key: object = None, *, lines: int | None = None) -> None:
        """Display ``content``. ``key`` identifies it (Text: ``text_key``) so unchanged text costs nothing;
        ``lines`` is its height when it is not Text (a layout pass happens only when the height changes).
        """
        if key is None:
            key = text_key(content) if isinstance(content, Text) else None
        if key is not None and key == self._key:
            return
        self._key = key
        # Made inert once per change (the key check above keeps an unchanged line free): whatever
        # outside text the caller put in, no control or escape reaches the terminal.
        if isinstance(content, Text):
            content = shown_text(content, multiline=True)
        self._content = content
        self._version += 1
        if lines is None:
            lines = content.plain.count("\n") + 1 if isinstance(content, Text) else -1
        self.refresh(layout=lines != self._lines or lines < 0)
        self._lines = lines

    def render(self) -> RenderableType:
        return self._content

    def _own_strips(self, width: int, base: Style) -> list[Strip] | None:
        text = self._content
        console = self.app.console
        lines = _plain_lines(text, width, console) if isinstance(text, Text) else None
        if lines is None or not isinstance(text, Text):
            return None
        own = text.style  # Text.render leaves the text's own style to its caller
        under = base + (console.get_style(own) if isinstance(own, str) else own) if own else base
        strips = []
        for y, line in enumerate(lines):
            # In one pass, what Strip.apply_style and apply_offsets do (a Strip each): the style under
            # each segment's own, and the offsets Textual's text selection reads (as on its own path).
            segments, x = [], 0
            for chunk, style, _ in line:
                segments.append(Segment(chunk, (under + style if style else under) + _offset(x, y)))
                x += len(chunk)
            strips.append(Strip(segments))
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.visual_style.rich_style
        state = (self._version, width, base)
        if self._strips is None or self._strips[0] != state:
            self._strips = (state, self._own_strips(width, base))
        strips = self._strips[1]
        if strips is None:
            return super().render_line(y)
        return strips[y] if y < len(strips) else Strip.blank(width, base)

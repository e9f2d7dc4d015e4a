"""A cheap text widget for values that change every refresh.

``Static.update`` asks for a full layout pass each time; for a widget whose size does not change
that is wasted work every second. ``Line.show`` redraws only when the text changed, and only
asks for layout when the number of lines changed.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.widget import Widget


class Line(Widget):
    DEFAULT_CSS = """
    Line { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._content: RenderableType = Text("")
        self._key: str | None = None
        self._lines = 1

    @property
    def content(self) -> RenderableType:
        return self._content

    def show(self, content: RenderableType, key: str | None = None, *, lines: int | None = None) -> None:
        """Display ``content``. ``key`` identifies it (Text: its markup) so unchanged text costs nothing;
        ``lines`` is its height when it is not Text (a layout pass happens only when the height changes).
        """
        if key is None:
            key = content.markup if isinstance(content, Text) else None
        if key is not None and key == self._key:
            return
        self._key = key
        self._content = content
        if lines is None:
            lines = content.plain.count("\n") + 1 if isinstance(content, Text) else -1
        self.refresh(layout=lines != self._lines or lines < 0)
        self._lines = lines

    def render(self) -> RenderableType:
        return self._content

"""Reusable Textual widgets: charts from history, the footer cut at whole keys, a cheap text line.

May import Textual, Rich and ``console.ui`` (formatting, the host protocol); no screen.
"""

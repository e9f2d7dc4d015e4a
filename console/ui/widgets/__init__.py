"""Reusable Textual widgets: charts from history, the footer cut at whole keys, a cheap text line.

May import Textual, Rich, ``console.ui`` (formatting, the host protocol) and
``console.telemetry.metrics.history`` (how many points a chart draws); no screen.
"""

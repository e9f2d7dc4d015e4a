"""Recording: the hub's status documents and raw metric payloads on disk, and read back by time.

A recording folder holds segment files (``writer``: rotation by time and size, retention by age and
size, one writer per folder) made of independently decodable, CRC-checked, zlib-compressed frames
(``frames``, ``payloads``) with an index beside each (``segments``); ``reader`` reads a folder or a
single cut file (``cutfile``) back by time. ``recorder`` feeds a writer from a live source in its
own thread, ``replay`` is a ``FleetSource`` over a recording, ``export`` writes OpenMetrics and CSV.
May import the core (``console.model``, ``status_doc``, ``status_parse``, ``paths``, ``secrets``) and
``console.telemetry`` (history, the source contract); never Textual, ``console.ui`` or the lifecycle.
"""

from __future__ import annotations

from pathlib import Path

from console.recording.reader import Recording
from console.recording.writer import RecordingError, RecordingWriter

__all__ = ["Recording", "RecordingError", "RecordingWriter", "default_recording_dir"]


def default_recording_dir(configured: str | None = None) -> Path:
    """Where recordings go: ``$ENGINEDECK_RECORDING_DIR``, else ``configured`` (``[console]
    recording_dir``), else ``recordings`` in the state dir (docs/recording.md: the variable wins)."""
    import os

    from console.paths import recordings_dir

    if os.environ.get("ENGINEDECK_RECORDING_DIR"):
        return recordings_dir()
    return Path(configured).expanduser() if configured else recordings_dir()

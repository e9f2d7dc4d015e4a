"""Per-user directories (platformdirs), overridable by environment for tests and CI."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

_APP = "enginedeck"


def config_dir() -> Path:
    """``$ENGINEDECK_CONFIG_DIR`` or the platform config dir (~/.config/enginedeck on Linux)."""
    env = os.environ.get("ENGINEDECK_CONFIG_DIR")
    return Path(env) if env else Path(platformdirs.user_config_dir(_APP))


def config_file() -> Path:
    return config_dir() / "config.toml"


def state_dir() -> Path:
    """Audit log and other state: ``$ENGINEDECK_STATE_DIR`` or the platform state dir."""
    env = os.environ.get("ENGINEDECK_STATE_DIR")
    return Path(env) if env else Path(platformdirs.user_state_dir(_APP))


def cache_dir() -> Path:
    env = os.environ.get("ENGINEDECK_CACHE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir(_APP))


def private_dir(path: Path) -> Path:
    """``path`` created if needed and made 0700: state (logs, records, audit) is its owner's only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_mode & 0o077 and st.st_uid == os.getuid():
        path.chmod(0o700)
    return path


def recordings_dir() -> Path:
    """Recordings (``enginedeck record``, the console's REC): ``$ENGINEDECK_RECORDING_DIR`` or
    ``recordings`` in the state dir (``console.recording.default_recording_dir`` puts ``[console]
    recording_dir`` between the two)."""
    env = os.environ.get("ENGINEDECK_RECORDING_DIR")
    return Path(env) if env else state_dir() / "recordings"


def bench_results_dir(configured: str | None = None) -> Path:
    """Where the bench's results are saved (the console's ``s``, ``enginedeck bench --save``):
    ``$ENGINEDECK_BENCH_DIR``, else ``configured`` (``[console] bench_dir``), else ``bench`` in the
    state dir; never the folder a command happened to start in. Absolute, so a notice can say it."""
    env = os.environ.get("ENGINEDECK_BENCH_DIR")
    chosen = Path(env) if env else Path(configured) if configured else state_dir() / "bench"
    return chosen.expanduser().absolute()

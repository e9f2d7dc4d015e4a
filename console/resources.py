"""Where the shipped data (engine profiles, layouts) lives: in the wheel or in the source tree."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory holding shipped data ``name`` ("engines" or "layouts").

    A built wheel carries them under ``console/_data``; an editable or source checkout keeps
    them at the repository root beside the package.
    """
    packaged = _PKG / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PKG.parent / name

"""An engine to talk to (``EngineTarget``) and the one place an API key is read from the environment.

Every client of an engine works from an ``EngineTarget``: the bench (and its child process: the
type is picklable and holds the *name* of the key's variable, never the key), the load generator,
the playground and the console's screens. A configured ``config.EngineInstance`` derives its own
(``EngineInstance.target``). The key's value is read when a request needs it, by
``api_key_from_env``, so it never sits in an object that is shown, logged or sent to a child.

This module imports nothing from the rest of the package at run time (config, secrets, clients and
the UI all use it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.profiles import EngineProfile


def api_key_from_env(env_name: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the variable ``env_name`` in ``environ`` (default: ours); None when no name is
    given or the variable is unset or empty (an empty key sends no credential)."""
    if not env_name:
        return None
    return (os.environ if environ is None else environ).get(env_name) or None


@dataclass(frozen=True, slots=True)
class EngineTarget:
    """One engine as its clients see it: name, profile, base URL, where its key comes from, its GPUs."""

    name: str
    profile: EngineProfile
    url: str
    api_key_env: str | None = None  # the NAME of the environment variable holding the key
    gpus: tuple[int, ...] = ()  # the GPUs it runs on, where known (bench GPU sampling)

    @property
    def api_key(self) -> str | None:
        """The key's value, read from the environment at the moment it is needed."""
        return api_key_from_env(self.api_key_env)

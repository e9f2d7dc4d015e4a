"""enginedeck: a terminal console for LLM inference engines.

The core modules here (``config``, ``profiles``, ``model``, ``target``, ``secrets``, ``errors``,
``paths``, ``ports``, ``listeners``, ``resources``, ``status_doc``, ``status_parse``, ``strictjson``,
``timespec``, ``keymap``) may import no other package of the console. Layers above them:
``telemetry`` (collectors, normalisation), ``lifecycle`` (starting and stopping engines), ``client``
(requests, load, benchmark), ``recording`` (record, replay, export), ``bundle`` (incident bundles),
``sim`` (simulated engines), ``ui`` (the only package that imports Textual) and ``commands`` (the
CLI's subcommands). This module imports nothing, so ``enginedeck --help`` stays light.
"""

__version__ = "0.1.0"

"""enginedeck: a terminal console for LLM inference engines.

The core modules here (``config``, ``profiles``, ``model``, ``target``, ``secrets``, ``errors``,
``paths``, ``ports``, ``listeners``, ``resources``, ``status_doc``, ``status_parse``, ``strictjson``,
``keymap``) may
import no other package of the console. Layers above them: ``telemetry`` (collectors, normalisation),
``lifecycle`` (starting and stopping engines), ``client`` (requests, load, benchmark), ``sim``
(simulated engines), ``bundle`` (incident bundles), ``ui`` (the only package that imports
Textual) and ``commands`` (the CLI's subcommands). This module imports nothing, so ``enginedeck --help`` stays light.
"""

__version__ = "0.1.0"

"""Subcommands: one module each (``register(sub)`` adds its parser), discovered by ``console.cli``.

Private helpers shared by several commands live in ``_args`` and ``_demo_slots``. May import every
other package; heavy ones (Textual, docker, aiohttp, the lifecycle) only inside the function that runs
the subcommand, so ``enginedeck --help`` stays light.
"""

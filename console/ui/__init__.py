"""The Textual console: the only package that imports Textual.

``launch`` starts it (flags, hub, app, shutdown); ``app`` is ``DeckApp``, which screens, widgets and
actions reach only through the typed ``host.DeckHost`` protocol. ``actions`` is the one action registry
(keys, footer, help, palette), ``screens/`` holds one module per screen and ``widgets/`` the reusable
widgets; ``control``/``control_lifecycle``/``control_remote``/``engine_control`` are how the console starts
and stops engines (``control_remote``: a remote host's, ``HOST/NAME``), ``explain`` and ``format``
what a cell shows, ``fleet_panels`` the overview's GPU, host and remote-hosts lines, ``bundle_key``
the incident-bundle key (ctrl+s),
``terminal_driver``/``terminal_guard``/``deadline_helper`` keep a lost terminal from hanging it. May
import every other package of the console; nothing outside ``console.ui`` (and ``console.commands``
that launch it) imports it.
"""

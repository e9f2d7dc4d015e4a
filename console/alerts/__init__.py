"""Engine-semantic alerts: rules on canonical metrics, evaluated per engine on each fleet snapshot.

``rules`` loads and validates the rules files (shipped ``alerts/rules.toml``, user overrides in the
config directory); ``signals`` says what every signal a rule may test reads and how it is computed;
``evaluate`` runs the pending -> firing -> resolved state machine with hysteresis, with time taken
from the snapshots (so tests drive it with a virtual clock); ``export`` writes the same rules in
each engine's raw metric names for Prometheus. Nothing here does I/O beyond reading rules files.
May import: the core (``console.model``, ``console.profiles``, ``console.errors``, ``console.paths``,
``console.resources``); never telemetry, lifecycle, client, sim, Textual or ``console.ui``.
"""

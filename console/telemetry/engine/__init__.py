"""One engine: HTTP probes of its health, identity and metrics (``scrape``) and its collection loop
(``collector``: health every period, a payload parsed, normalised and windowed off the event loop).

May import the core (config, model, secrets), ``console.transport`` (the HTTP client and bodies),
``console.telemetry.metrics`` (parse and normalise) and ``console.telemetry`` (the input gate);
never Textual.
"""

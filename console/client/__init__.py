"""The console as an engine's HTTP client: everything that sends requests to an engine and times them.

The streaming client (over ``console.transport.http``; ``sse``, ``stream``: request bodies and
per-event timing, ``timing``: per-request metrics), the load generator (``loadgen``, ``arrivals``,
``workloads``, ``aggregate``), the engine comparison benchmark (``bench``, ``swap``: single-GPU A/B,
``report``, ``progress``: its typed events, ``servermetrics`` and ``gpu``: what the engine and the GPUs
report during a level) and the playground's one-prompt client (``playground``). Engines are addressed
by ``console.target.EngineTarget``. May import: the core (config, profiles, model, secrets, target,
errors), ``console.transport`` (the HTTP client), ``console.telemetry`` (metric parsing, GPU sources)
and, inside ``swap`` only, ``console.lifecycle``; never Textual or ``console.ui``.
"""

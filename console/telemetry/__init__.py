"""Telemetry: parsing engine metrics, normalising them to canonical metrics, windows over time.

Modules: ``promtext`` (Prometheus text parser), ``trtjson`` (trtllm-serve JSON iteration stats),
``normalize`` (raw series -> canonical per-model values via an engine profile), ``windows``
(rates, windowed histogram quantiles, counter resets), ``scrape`` and ``bodies`` (HTTP probes of one
engine), ``recognize`` (what an unexpected payload is), ``nvml``, ``simgpu``, ``host`` and
``attribution`` (GPUs, host CPU/memory, which engine owns a GPU process), ``deadline`` (blocking calls
with a deadline), ``history``, ``hub`` (schedules the collectors, publishes fleet snapshots) and
``source`` (the contract with its readers). May import: the core (config, profiles, model, secrets)
and ``console.transport`` (the HTTP client ``scrape`` fetches with);
never ``console.lifecycle``, ``console.client``, Textual or ``console.ui``.
"""

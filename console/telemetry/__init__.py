"""Telemetry: collecting engine metrics, GPUs and the host, and publishing fleet snapshots.

Subpackages, from the wire up: ``engine`` (one engine's HTTP probes and its collection loop),
``metrics`` (parse a payload, normalise it to canonical metrics, windows over time, chart history),
``gpu`` (NVML, simulated GPUs, energy, which engine owns a GPU process, the hub's GPU side) and
``host`` (host CPU and memory, blocking calls with a deadline, the hub's host side). At the top:
``hub`` (schedules the engine collectors and the GPU and host sides, assembles fleet snapshots),
``fanout`` (hands each snapshot and payload to its readers, keeps the history) and ``source`` (the
contract with its readers, the history schema). May import: the core (config, profiles, model,
secrets) and ``console.transport`` (the HTTP client and body decoding the probes use); never
``console.lifecycle``, ``console.client``, Textual or ``console.ui``.
"""

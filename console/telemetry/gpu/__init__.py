"""GPUs: NVML readings (``nvml``, ``power_integrator``), simulated GPUs for the demo (``simgpu``),
energy per GPU and engine (``energy``) and which engine owns a GPU process (``attribution``).

May import the core (model) and ``console.telemetry.host`` (NVML calls run under its deadline);
never Textual.
"""

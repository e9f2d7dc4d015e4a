"""GPUs: NVML readings (``nvml``, ``power_integrator``), simulated GPUs for the demo (``simgpu``),
energy per GPU and engine (``energy``), which engine owns a GPU process (``attribution``), and the
hub's GPU side over them all (``side``: the latest readings and which engine holds which GPU).

May import the core (model) and ``console.telemetry.host`` (NVML calls run under its deadline);
never Textual.
"""

"""The incident bundle: one ``.tar.gz`` that holds what a bug report for an LLM engine asks for.

Modules: ``archive`` (files in, every text through the one secret rule with a count of what it
masked, ``manifest.json`` with a sha256 per file, a 0600 archive out), ``window`` (``--last 15m``),
``recorded`` (the window's recording as one scrubbed, replayable cut), ``engines`` (each engine's
raw ``/metrics``, version and models endpoints, probed now), ``launch_facts`` (launch commands,
container inspect data and log tails, masked), ``gpu_facts`` (driver, devices, clocks, throttle
reasons, ECC, XID from NVML),
``host_facts`` (kernel, distro, CPU, memory, Python and package versions), ``summary`` (the Markdown
shaped like the vLLM/SGLang bug templates) and ``make`` (puts one bundle together).

UI-free: the console hands it a screenshot as SVG text. May import: the core (config, profiles,
model, secrets, status_doc, paths), ``console.telemetry``, ``console.lifecycle`` and
``console.recording``; never Textual or ``console.ui``.
"""

"""Simulated inference engines (vLLM, SGLang, trtllm-serve, TGI, llama-server) for demos and tests.

- ``scheduler``: pure continuous-batching scheduler with a paged KV pool and a prefix cache;
- ``engines``: one flavour per real engine (routes, auth, errors, SSE chunks, metrics);
- ``server``: the aiohttp server; ``exposition``/``promtext``: each engine's metrics text;
  ``faults``: injected faults; ``tokens``: the toy tokenizer;
- ``fleet_spec``: what a simulated fleet is made of; ``fleet``: several engines as child processes
  plus ``load`` (synthetic client load).

May import only ``console.ports`` from the rest of the console: the simulator stands alone, and
never imports Textual or ``console.ui``.
"""

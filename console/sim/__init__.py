"""Simulated inference engines (vLLM, SGLang, trtllm-serve, TGI, llama-server) for demos and tests.

- ``scheduler``: pure continuous-batching scheduler with a paged KV pool and a prefix cache;
- ``engines``: one flavour per real engine (routes, auth, errors, SSE chunks, metrics);
- ``server``: the aiohttp server; ``fleet``: several engines as child processes plus ``load``.
"""

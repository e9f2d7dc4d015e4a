"""The host machine: CPU and memory from psutil (``usage``) and blocking calls (NVML, psutil) run
in one worker thread with a deadline (``deadline``), and the hub's host side (``side``: the host
loop and each engine's process stats).

May import the core (model) only; never Textual.
"""

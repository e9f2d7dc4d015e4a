"""The host machine: CPU and memory from psutil (``usage``) and blocking calls (NVML, psutil) run
in one worker thread with a deadline (``deadline``).

May import the core (model) only; never Textual.
"""

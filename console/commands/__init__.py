"""Subcommands; one module each, discovered by ``console.cli``."""

"""Errors that reach the user as one line and an exit code, never as a traceback.

A message often quotes what an engine, a URL or a remote host said (an error body, a model id, ssh's
stderr): it is made safe where it is made, so every place that shows one (the CLI's error line, a
toast, the audit log) shows it scrubbed of credentials and inert (``console.textout.shown``).
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: bad input, bad configuration, missing daemon.

    The CLI prints ``enginedeck: <message>`` on one line and exits with ``exit_code``. ``message``
    is the text given with credentials masked and controls, escapes and line breaks made visible
    placeholders: nothing quoted in it can act on a terminal or spill onto a second line.
    """

    def __init__(self, message: str, exit_code: int = 1, *, made_safe: bool = False) -> None:
        if not made_safe:  # ``made_safe``: the caller made each part safe itself (ConfigError)
            from console.textout import shown

            message = shown(message)
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class ConfigError(UserError):
    """A configuration or profile file is invalid. Message names file, key and problem.

    The key is made inert but not scrubbed: a key named ``password`` followed by ``: unknown key``
    is the shape of a secret assignment, and the key is the user's own word, not a secret."""

    def __init__(self, file: str, key: str, problem: str) -> None:
        from console.textout import shown
        from console.textsafe import inert

        where = f"{shown(file)}: {inert(key)}" if key else shown(file)
        super().__init__(f"{where}: {shown(problem)}", exit_code=1, made_safe=True)
        self.file = file
        self.key = key
        self.problem = problem

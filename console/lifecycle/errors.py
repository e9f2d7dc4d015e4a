"""Lifecycle errors: one actionable line each, and the Docker error translation."""

from __future__ import annotations

import os
import re

from console.errors import UserError

# Exit codes of the headless lifecycle commands.
EXIT_OK = 0
EXIT_USER = 1  # configuration or user error (also: image not present, port in use)
EXIT_ENGINE = 2  # engine failed or unreachable (daemon down, exited, GPU refused)
EXIT_TIMEOUT = 3


class LifecycleError(UserError):
    """A lifecycle action failed; ``message`` is one line a user can act on."""

    def __init__(self, message: str, exit_code: int = EXIT_ENGINE) -> None:
        super().__init__(message, exit_code)


class LifecycleTimeout(LifecycleError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_TIMEOUT)


class ActionRefused(LifecycleError):
    """The action was not attempted: another one on the same engine is in progress, or the engine
    is not this enginedeck's to control (monitor-only; a container it did not start). Audited as
    refused, not failed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USER)


class DockerUnreachable(LifecycleError):
    """The Docker daemon did not answer (not running, wrong DOCKER_HOST): the next call connects anew."""


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else ""


def translate_docker_error(
    exc: BaseException, *, instance: str = "", image: str = "", port: str = ""
) -> LifecycleError:
    """Map a docker SDK / requests exception to one clear line. The SDK raises ``requests``'
    ``ConnectionError`` (not a ``DockerException``) when a client of a fixed API version finds no
    daemon, and ``DockerException("Error while fetching server API version: ...")`` otherwise."""
    import docker.errors
    import requests.exceptions

    text = str(exc)
    explanation = getattr(exc, "explanation", None)
    if isinstance(explanation, bytes):
        explanation = explanation.decode("utf-8", "replace")
    detail = _first_line(str(explanation) if explanation else text)
    if isinstance(exc, docker.errors.ImageNotFound) or (
        isinstance(exc, docker.errors.NotFound) and "no such image" in text.lower()
    ):
        target = f"`enginedeck pull {instance}`" if instance else "`enginedeck pull NAME`"
        return LifecycleError(f"image {image or '?'} is not present locally; run {target} (start never pulls)", 1)
    low = text.lower()
    if isinstance(exc, requests.exceptions.ConnectionError | docker.errors.DockerException) and (
        "permission denied" in low or "permissionerror" in low
    ):
        return LifecycleError(
            f"permission denied on the Docker socket ({docker_host()}): "
            "run as a member of the 'docker' group or as root"
        )
    if isinstance(exc, requests.exceptions.ConnectionError) or (
        isinstance(exc, docker.errors.DockerException)
        and not isinstance(exc, docker.errors.APIError)
        and ("connection" in low or "filenotfounderror" in low or "no such file" in low)
    ):
        return DockerUnreachable(
            f"cannot connect to the Docker daemon at {docker_host()}: is dockerd running? (or set DOCKER_HOST)"
        )
    if "port is already allocated" in low or "address already in use" in low:
        m = re.search(r"(\d+\.\d+\.\d+\.\d+:\d+)", detail)
        where = m.group(1) if m else port or "the host port"
        who = "another container" if "already allocated" in low else "another process"
        return LifecycleError(
            f"port {where} is already in use (by {who}); "
            f"stop it or set a different port for {instance or 'the engine'}",
            1,
        )
    if "could not select device driver" in low:
        return LifecycleError(
            "GPU request refused: this Docker has no NVIDIA runtime ("
            + detail.removesuffix(".")
            + '); install nvidia-container-toolkit, or set gpus = "none"'
        )
    if isinstance(exc, docker.errors.APIError) and exc.status_code == 409:
        return LifecycleError(f"container conflict: {detail}", 1)
    if isinstance(exc, docker.errors.DockerException):
        return LifecycleError(f"docker: {detail}")
    return LifecycleError(f"{type(exc).__name__}: {detail}")

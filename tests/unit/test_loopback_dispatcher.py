"""loopback/dispatcher.py: the dispatcher as a local process keeps its files in the fleet's
folder, the kubernetes client's temporary certificate included."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import time
from pathlib import Path

import pytest
import yaml

from loopback import pki
from loopback.dispatcher import LocalDispatcher


def test_a_killed_dispatcher_leaves_its_certificate_file_in_the_fleets_folder_not_in_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client writes the kubeconfig's inline CA to a temporary file and removes it only
    # at a normal exit; a killed process leaves it behind. It must be left where `down`
    # removes it, not in the machine's temporary folder.
    outer = tmp_path / "machine-tmp"
    outer.mkdir()
    monkeypatch.setenv("TMPDIR", str(outer))
    folder = tmp_path / "manager"
    folder.mkdir()
    # A server that accepts and never answers: the dispatcher waits on it, alive, with its
    # kubeconfig loaded.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    ca = base64.b64encode(pki.Authority(folder, "ca", "test-ca").pem()).decode()
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "manager",
                "cluster": {
                    "server": f"https://127.0.0.1:{silent.getsockname()[1]}",
                    "certificate-authority-data": ca,
                },
            }
        ],
        "users": [{"name": "dispatcher", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "manager", "user": "dispatcher"}}],
        "current-context": "c",
    }
    local = LocalDispatcher(folder)
    local.prepare_with("{}", yaml.safe_dump(kubeconfig))
    started = local.start()
    scratch = folder / "dispatcher-tmp"
    pem = base64.b64decode(ca)

    def certificates() -> list[Path]:
        # Only the CA's file: Python's tempfile also writes and removes a probe file
        # (b"blat", tempfile._get_default_tempdir) there, which a kill can catch.
        found = []
        for path in scratch.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if path.read_bytes() == pem:
                    found.append(path)
        return found

    try:
        deadline = time.monotonic() + 30
        while not certificates() and time.monotonic() < deadline:
            assert not started.exited(), local.log.read_text()
            time.sleep(0.2)
    finally:
        os.kill(started.pid, signal.SIGKILL)
        if started.process is not None:
            started.process.wait(10)
        silent.close()
    assert len(certificates()) == 1
    assert list(outer.iterdir()) == []

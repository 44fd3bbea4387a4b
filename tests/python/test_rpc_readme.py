"""The remote-function examples (in docs/guide.md, the README's guide) run as
written: the `pf serve` and `pf --connect` session, and the Python example
against that server.

The guide shows port 9190; the test runs the same lines on a port that it
finds free at the time, so that test runs never compete for a fixed port.
"""
import os
import re
import shlex
import socket
import subprocess
import sys

import pytest

from conftest import ROOT
from test_readme import readme

PF = os.environ.get("PF_TEST_CLI_REL") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "bin", "pf")
DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")


def block_after(marker):
    # The README and then docs/guide.md, where the remote-function section
    # now lives (test_readme.readme reads both).
    m = re.search(re.escape(marker) + r"\n```[a-z]*\n(.*?)```", readme(), re.S)
    assert m, "neither README.md nor docs/guide.md has a block after %s" % marker
    return m.group(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "build" / "examples").mkdir(parents=True)
    os.symlink(DEMO_PLUGIN, str(tmp_path / "build" / "examples" / "demo_plugin.so"))
    return tmp_path


def session_steps(text, port):
    """[(command, expected output lines)] of a console block."""
    steps = []
    for line in text.replace("9190", str(port)).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def test_readme_rpc_session_and_python_example(scratch):
    port = free_port()
    steps = session_steps(block_after("<!-- rpc-session -->"), port)
    serve_cmd, serve_out = steps[0]
    assert serve_cmd.endswith(" &")
    env = dict(os.environ, PATH=os.path.dirname(PF) + os.pathsep + os.environ["PATH"],
               PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    server = subprocess.Popen(shlex.split(serve_cmd[:-2]), cwd=str(scratch), env=env,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr.readline().rstrip("\n") == serve_out[0]
        for cmd, want in steps[1:]:
            got = subprocess.run(cmd, shell=True, cwd=str(scratch), env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            assert got.stdout.splitlines() == want, cmd
        code = block_after("<!-- rpc-python-example -->").replace("9190", str(port))
        got = subprocess.run([sys.executable, "-c", code], cwd=str(scratch), env=env,
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        assert got.stdout.splitlines() == block_after("<!-- rpc-python-output -->").splitlines()
    finally:
        server.terminate()
        assert server.wait(30) == 0

"""The README's Python example runs as shown."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def test_readme_python_example_runs(testlib, tmp_path):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- python-example -->\n```python\n(.*?)```", text, re.S)
    assert m, "the README has no python example block"
    code = m.group(1).replace('"build/python/libpf_testlib.so"', repr(testlib._name))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "42" and lines[1] == "42" and lines[2] == "HELLO"
    assert lines[3].startswith("TypeError: testing.add: argument 1 must be int")
    assert lines[4].startswith("KeyError, caused by KeyError('missing')")
    assert lines[5] == "[1.5 1.5 1.5]"
    assert r.stderr == ""

"""The Python examples of the README and of docs/guide.md (the guide it points
to), the demo's output and the plugin excerpt are true. (Their C examples and
shell sessions: tools/test-readme.sh.)

The examples use the default build's paths ("build/examples/demo_plugin.so");
they run in a scratch directory where that path leads to this build's demo
plugin ($PF_DEMO_PLUGIN, which `make test-python` sets).
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")


def readme():
    """The README followed by the guide: a marker is unique across both."""
    text = ""
    for name in ("README.md", os.path.join("docs", "guide.md")):
        path = os.path.join(ROOT, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                text += f.read()
    return text


def block_after(marker, lang=""):
    """The fenced block that follows the marker line."""
    m = re.search(re.escape(marker) + r"\n```" + lang + r"\n(.*?)```", readme(), re.S)
    assert m, "neither README.md nor docs/guide.md has a block after %s" % marker
    return m.group(1)


@pytest.fixture
def scratch(tmp_path):
    """A directory where build/examples/demo_plugin.so is this build's plugin."""
    assert os.path.exists(DEMO_PLUGIN), (
        "the demo plugin %s is missing; run `make test-python`" % DEMO_PLUGIN)
    (tmp_path / "build" / "examples").mkdir(parents=True)
    os.symlink(DEMO_PLUGIN, str(tmp_path / "build" / "examples" / "demo_plugin.so"))
    return tmp_path


def run_python(code_or_args, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable] + args, env=env, cwd=str(cwd),
                          capture_output=True, text=True, timeout=120)


def test_readme_python_example_runs(scratch):
    r = run_python(block_after("<!-- python-example -->", "python"), scratch)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "42",
        "Hello, Python!",
        "14",
        "30",
        "TypeError: typed function 'demo.add' int64(a:int64,b:int64): argument 1 'b': "
        "expected int64, got str",
        "KeyError 'missing' raised in fails",
        "[1.5 1.5 1.5]",
        "{'count': 2, 'sizes': (2, 3)} True",
    ]
    assert r.stderr == ""


@pytest.mark.parametrize("name", ["modules", "object-types", "register-object", "bind"])
def test_readme_python_block_prints_what_it_shows(name, scratch):
    r = run_python(block_after("<!-- python: %s -->" % name, "python"), scratch)
    assert r.returncode == 0, r.stderr
    assert r.stdout == block_after("<!-- python-output: %s -->" % name)
    assert r.stderr == ""


def test_readme_demo_output_is_what_the_demo_prints(tmp_path):
    assert os.path.exists(DEMO_PLUGIN), DEMO_PLUGIN
    script = os.path.join(ROOT, "examples", "demo.py")
    r = run_python([script, DEMO_PLUGIN], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == block_after("<!-- demo-output -->")


def test_demo_finds_the_plugin_through_the_environment(tmp_path):
    script = os.path.join(ROOT, "examples", "demo.py")
    env = dict(os.environ, PF_DEMO_PLUGIN=DEMO_PLUGIN,
               PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    r = subprocess.run([sys.executable, script], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Loaded demo_plugin.so: 9 functions\n")
    env["PF_DEMO_PLUGIN"] = str(tmp_path / "missing.so")
    r = subprocess.run([sys.executable, script], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "FileNotFoundError" in r.stderr and "missing.so" in r.stderr


def test_readme_plugin_excerpt_is_in_the_plugin_source():
    excerpt = block_after("<!-- excerpt: examples/plugin/demo_plugin.c -->", "c")
    with open(os.path.join(ROOT, "examples", "plugin", "demo_plugin.c"), encoding="utf-8") as f:
        source = f.read()
    chunks = excerpt.split("/* ... */\n")
    assert len(chunks) >= 2
    pos = 0
    for chunk in chunks:
        at = source.find(chunk, pos)
        assert at >= 0, "not in demo_plugin.c (in this order):\n" + chunk
        pos = at + len(chunk)


def test_readme_type_table_matches_the_python_annotations(pf):
    """The "in Python" column of the typed-signature table is what
    inspect.signature shows, for arguments and for results."""
    import collections.abc
    import ctypes
    import inspect

    import numpy as np
    known = {"int": int, "float": float, "bool": bool, "str": str, "bytes": bytes,
             "ctypes.c_void_p": ctypes.c_void_p, "numpy.ndarray": np.ndarray,
             "DataType": pf.DataType, "Device": pf.Device, "None": None}
    section = readme().split("## Typed C functions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == 18
    # The object types: "a list or tuple; `Array`" reads as what an argument
    # takes, then the result's class.
    import typing
    takes = {"array": typing.Union[list, tuple, pf.Array], "map": typing.Union[dict, pf.Map],
             "shape": pf.Shape, "object": object, "list": typing.Union[list, tuple, pf.List],
             "dict": typing.Union[dict, pf.Dict]}
    seen = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        ctypes_ = re.findall(r"`([a-z0-9]+)`", cells[0])
        wanted = re.findall(r"`([A-Za-z_.]+)`", cells[-1])
        for i, ctype in enumerate(ctypes_):
            seen.add(ctype)
            f = pf.convert(lambda *a: None)
            if ctype == "void":
                f.set_info(signature="void()")
                assert inspect.signature(f).return_annotation is None
                continue
            if ctype == "any":  # "no annotation"
                f.set_info(signature="any(any)")
                sig = inspect.signature(f)
                assert list(sig.parameters.values())[0].annotation is inspect.Parameter.empty
                assert sig.return_annotation is inspect.Signature.empty
                continue
            f.set_info(signature="%s(%s)" % (ctype, ctype))
            sig = inspect.signature(f)
            arg = list(sig.parameters.values())[0].annotation
            if ctype == "func":  # "a callable; `Function`": any callable in, Function out
                assert arg is collections.abc.Callable and sig.return_annotation is pf.Function
                continue
            if ctype in takes:
                assert arg == takes[ctype], ctype
                assert sig.return_annotation is getattr(pf, wanted[-1]), ctype
                continue
            want = known[wanted[i] if len(wanted) == len(ctypes_) else wanted[0]]
            assert arg is want and sig.return_annotation is want, ctype
    assert seen >= {"int8", "uint64", "float32", "double", "bool", "str", "bytes", "ptr",
                    "tensor", "dtype", "device", "func", "void", "array", "map", "shape",
                    "object", "list", "dict", "any"}


def test_readme_scale_signature_claim(pf):
    import inspect
    text = " ".join(readme().split())
    shown = []
    # examples/typed.c: scale's checked registration, sqrt's string.
    for signature in ("float64(x:float64,times:int32)", "float64(float64)"):
        f = pf.convert(lambda *a: None)
        f.set_info(signature=signature)
        shown.append(inspect.signature(f))
    claim = "`%s` for `example.scale` below, and `%s` for its unnamed `example.sqrt`"
    assert claim % tuple(shown) in text


def test_readme_first_plugin_builds_and_runs(tmp_path):
    """"Your first plugin": the C file, built by the command shown (with
    this interpreter as python3, the package from the tree), then the
    Python shown, which prints what the README says."""
    (tmp_path / "mylib.c").write_text(block_after("<!-- first-plugin: mylib.c -->", "c"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, str(bindir / "python3"))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    commands = [line[2:] for line in block_after("<!-- first-plugin: build -->", "console")
                .splitlines() if line.startswith("$ ")]
    assert commands
    for command in commands:
        r = subprocess.run(["bash", "-c", command + " -Wall -Wextra -Werror"], cwd=str(tmp_path),
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    r = run_python(block_after("<!-- first-plugin: python -->", "python"), tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == block_after("<!-- first-plugin: output -->")

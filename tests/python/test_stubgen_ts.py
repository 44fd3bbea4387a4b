"""TypeScript declarations for the Node.js package: `python -m
packedfunc.stubgen --lang ts` and `pf stubgen --lang ts` (which runs it),
from the metadata the Python stubs read. tools/test-node-pack.sh checks
that they type-check with tsc --strict, and that a wrong call does not."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

from packedfunc import _stubgen_ts

BUILD = os.environ.get("BUILD", "build")
DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, BUILD, "examples", "demo_plugin.so")
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(ROOT, BUILD, "modules")
CXX_PLUGIN = os.path.join(MODULE_DIR, "mod_cxx.so")
TYPES_MODULE = os.path.join(MODULE_DIR, "mod_types.so")
ECHO_MODULE = os.path.join(MODULE_DIR, "mod_echo.so")
PF = os.environ.get("PF_TEST_CLI_REL") or os.path.join(ROOT, BUILD, "bin", "pf")
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))


def _stubgen(*args):
    return subprocess.run([sys.executable, "-m", "packedfunc.stubgen", *args], env=ENV,
                          capture_output=True, text=True, timeout=120)


def _declares(module, wants):
    """The declarations of `module` hold each text of `wants`."""
    text = _stubgen_ts.generate_module(module)
    for want in wants:
        assert want in text, want


def test_a_modules_declarations_have_names_optional_params_types_and_docs():
    _declares(CXX_PLUGIN, [
        "import * as pf from 'packedfunc';\n",
        # a typed function: named parameters, the defaulted ones optional
        "  readonly cxx: {\n    /** From the C file. */\n"
        "    readonly c_half: pf.TypedFunction<[x: number | bigint], number | bigint>;\n",
        "    /** Clamps x. */\n"
        "    readonly clamp: pf.TypedFunction<[x: number, lo?: number, hi?: number], number>;\n",
        # a tensor parameter
        "    readonly total: pf.TypedFunction<[x: pf.TensorArg | ArrayBufferView, scale?: number], "
        "number>;\n",
        # packed, without a signature: any arguments
        "    /** Sums ints. */\n    readonly sum: pf.PackedFunction;\n",
        # an object type: a class in its key's namespace, constructor,
        # writable field, method
        "export declare namespace cxx {\n  /** A counter from C++. */\n"
        "  class Counter extends pf.PackedObject {\n"
        "    static readonly typeKey: string;\n    static readonly typeIndex: number;\n"
        "    constructor(start?: number | bigint);\n"
        "    /** The count. */\n    count: number | bigint;\n"
        "    /** Adds. */\n    add(by?: number | bigint): number | bigint;\n  }\n}\n",
        "export interface Types {\n  readonly 'cxx.Counter': typeof cxx.Counter;\n}\n",
        "export type LoadedModule = pf.Module<Types> & Functions;\n",
    ])


def test_the_demo_plugins_declarations():
    _declares(DEMO_PLUGIN, [
        # a subclass of the module's own class; a read-only field; a field
        # whose value comes back as another type than it goes in
        "  class Counter extends demo.Base {\n",
        "    /** The name given to the constructor. */\n    readonly name: string;\n",
        "    get tag(): pf.PackedObject;\n    set tag(value: pf.Value);\n",
        # a static method; a method without a signature
        "    static max_step(): number | bigint;\n",
        "    reset(...args: pf.Value[]): any;\n",
        "    readonly greet: pf.TypedFunction<[name: string], string>;\n",
    ])


def test_an_object_parameter_is_its_class_and_unnamed_parameters_are_numbered():
    _declares(TYPES_MODULE, [
        "    readonly value_of: pf.TypedFunction<[arg0: mt.Thing], number | bigint>;\n",
        "    constructor(arg0: number | bigint);\n"])
    # bytes, bool, a container result, a shape parameter, top-level names
    _declares(ECHO_MODULE, [
        "  readonly echo_bytes: pf.TypedFunction<[arg0: Uint8Array], Uint8Array>;\n",
        "  readonly echo_bool: pf.TypedFunction<[arg0: boolean], boolean>;\n",
        "  readonly range: pf.TypedFunction<[arg0: number | bigint], pf.PackedArray>;\n",
        "  readonly shape_size: pf.TypedFunction<[arg0: pf.Shape], number | bigint>;\n",
        "export interface Types {\n}\n"])


def test_names_and_docs_that_typescript_cannot_hold_as_they_are():
    w = _stubgen_ts._Writer({})
    w.doc(1, "Ends a comment */ early.\nSecond line.")
    assert w.lines == ["  /**", "   * Ends a comment *\\/ early.", "   * Second line.", "   */"]
    assert _stubgen_ts._quoted("my-name") == '"my-name"'
    assert _stubgen_ts._quoted('a"b\\c') == '"a\\"b\\\\c"'
    assert _stubgen_ts._quoted("add") == "add"
    # A key that is not a path of identifiers, or that begins with a name
    # the declarations use, is left out and said so.
    paths, skipped = _stubgen_ts._class_paths({"demo.Counter": 1, "my-lib.Thing": 2,
                                               "demo.class": 3, "Types.X": 4})
    assert paths == {"demo.Counter": "demo.Counter"}
    assert [k for k, _ in skipped] == ["Types.X", "demo.class", "my-lib.Thing"]


@pytest.mark.backend_independent
def test_the_command_and_pf_stubgen_write_the_same_declarations(tmp_path):
    a, b = tmp_path / "a.d.ts", tmp_path / "b.d.ts"
    r = _stubgen("--lang", "ts", CXX_PLUGIN, "-o", str(a))
    assert r.returncode == 0 and r.stdout == r.stderr == "", r.stderr
    r = subprocess.run([PF, "stubgen", "--lang", "ts", CXX_PLUGIN, "-o", str(b)],
                       env=dict(ENV, PF_PYTHON=sys.executable), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert a.read_text() == b.read_text() == _stubgen_ts.generate_module(CXX_PLUGIN)
    assert a.read_text().startswith("// TypeScript declarations for the packedfunc module ")


@pytest.mark.backend_independent
def test_the_commands_errors_with_lang_ts(tmp_path):
    r = _stubgen("--lang", "ts", "--registry", "demo")
    assert r.returncode == 2
    assert "--lang ts describes a module (MODULE.so), not the registry" in r.stderr, r.stderr
    r = _stubgen("--lang", "rust", CXX_PLUGIN)
    assert r.returncode == 2 and "invalid choice: 'rust'" in r.stderr, r.stderr
    r = _stubgen("--lang", "ts", str(tmp_path / "absent.so"))
    assert r.returncode == 1
    assert r.stderr.startswith("python -m packedfunc.stubgen: FileNotFoundError: "), r.stderr

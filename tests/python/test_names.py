"""A str that names something in C (a function, a prefix of names, an
endpoint) and contains a NUL would reach C cut short at the NUL: "a\\0b"
would mean "a". Every such argument is refused with a ValueError that
names the Python entry point and the argument, before C sees it."""
import os

import pytest

import packedfunc as pf
from packedfunc import rpc

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def plugin():
    path = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")
    assert os.path.exists(path), "%s is missing; run `make test-python`" % path
    return pf.load_module(path)


def _named(name):
    def f():
        return 1
    f.__name__ = name
    return f


# (where the error points, what it calls the argument, the call)
NAME_TAKERS = [
    ("register_func", "name", lambda s: pf.register_func(s, lambda: 1)),
    ("register_func", "name", lambda s: pf.register_func(_named(s))),
    ("get_global_func", "name", lambda s: pf.get_global_func(s)),
    ("remove_global_func", "name", lambda s: pf.remove_global_func(s)),
    ("list_global_func_names", "name", lambda s: pf.list_global_func_names(s)),
    ("init_api", "prefix", lambda s: pf.init_api(s, __name__)),
]


@pytest.mark.parametrize("where,what,call", NAME_TAKERS,
                         ids=["register_func", "register_func-decorator", "get_global_func",
                              "remove_global_func", "list_global_func_names", "init_api"])
def test_registry_names_with_nul(where, what, call):
    # "testing.echo\0junk" cut at the NUL is a registered name: a lookup
    # would find it and a removal would remove it.
    with pytest.raises(ValueError, match=r"^%s: %s .* contains a NUL character" % (where, what)):
        call("testing.echo\0junk")
    assert pf.get_global_func("testing.echo", allow_missing=True) is not None
    assert "testing.echo\0junk" not in pf.list_global_func_names("testing.")


def test_module_names_with_nul(plugin):
    name = plugin.list_function_names()[0] if hasattr(plugin, "list_function_names") \
        else "demo.add"
    with pytest.raises(ValueError, match=r"^Module.get_function: name .* contains a NUL"):
        plugin.get_function(name + "\0junk")
    with pytest.raises(ValueError, match=r"^Module.export_global: prefix .* contains a NUL"):
        plugin.export_global("pytest.names\0junk.")
    assert name + "\0junk" not in plugin
    with pytest.raises(KeyError):
        plugin[name + "\0junk"]


def test_function_metadata_name_with_nul():
    f = pf.convert(lambda: 1)
    with pytest.raises(ValueError, match=r"^Function.set_info: name contains a NUL"):
        f.set_info(name="a\0b")
    assert f.name is None


@pytest.mark.parametrize("kwargs,what", [
    ({"expose": ["testing\0junk"]}, "expose"),
    ({"expose": [b"testing\0junk"]}, "expose"),
    ({"endpoint": "tcp://127.0.0.1:*\0junk"}, "endpoint"),
    ({"authorized_keys": ["k" * 40 + "\0"]}, "authorized_keys"),
    ({"curve_secret_key": "k" * 40 + "\0"}, "curve_secret_key"),
])
def test_rpc_serve_strings_with_nul(kwargs, what):
    # An expose prefix "testing\0junk" cut to "testing" would serve every
    # testing.* function to any client.
    args = {"endpoint": "tcp://127.0.0.1:*"}
    args.update(kwargs)
    endpoint = args.pop("endpoint")
    with pytest.raises(ValueError, match=r"^packedfunc.rpc: %s contains a NUL character" % what):
        server = rpc.serve(endpoint, **args)
        server.stop()


def test_rpc_connect_endpoint_with_nul():
    with pytest.raises(ValueError, match=r"^packedfunc.rpc: endpoints contains a NUL character"):
        rpc.connect("tcp://127.0.0.1:1\0junk", timeout=0.2)

"""The type stubs (`mfc/_mfc.pyi`) list exactly the extension module's public names, classes'
members included; `mfc` exports those and the pure-Python ones (`mfc.sampling`, `mfc.training`,
typed inline); and every public name has a docstring (the framework modules are checked by
`test_docs.py`)."""

import ast
import inspect
from pathlib import Path

import mfc
from mfc import _mfc, sampling, training


def stub_names():
    path = Path(mfc.__file__).with_name("_mfc.pyi")
    tree = ast.parse(path.read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {
                item.name
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not item.name.startswith("_")
            }
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
    return names


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stubs_match_the_module():
    stubs = stub_names()
    module = public(_mfc)
    assert set(stubs) == module, set(stubs) ^ module
    for name, members in stubs.items():
        obj = getattr(_mfc, name)
        if members is None:
            continue
        if issubclass(obj, Exception):
            assert members == set(), name
            continue
        assert members == public(obj), (name, members ^ public(obj))
    assert set(mfc.__all__) == module | set(sampling.__all__) | set(training.__all__)


def test_every_public_name_has_a_docstring():
    names = [(_mfc, name) for name in public(_mfc)]
    names += [(m, n) for m in (sampling, training) for n in m.__all__]
    for module, name in names:
        obj = getattr(module, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj) and not issubclass(obj, Exception):
            for member in public(obj):
                assert inspect.getdoc(getattr(obj, member)), f"{name}.{member}"

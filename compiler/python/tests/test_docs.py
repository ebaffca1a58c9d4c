"""Every public callable of ``mfc`` documents every parameter it takes, by name, in what
``help()`` shows (its runtime ``__doc__``) and, for the extension module, in its stub
(``mfc/_mfc.pyi``) too, whose parameters are the runtime signature's.

Covered: the extension's functions, classes (the constructor's parameters in the class's
docstring, with ``__init__``'s in the stub) and methods, and every pure-Python submodule of the
installed package (``mfc.sampling``, ``mfc.training``, ...): the public names it defines
(``__all__``), methods of its classes included. A framework module (``mfc.torch``, ``mfc.jax``,
``mfc.flower``) is covered when its framework is importable, skipped otherwise.

A parameter counts as documented when its name appears as an entry (``name:`` or
``name (type):`` at the start of a line, Google style) or in backticks (```name``` or
```name=value```, single or double), not merely as a word of prose."""

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import mfc
from mfc import _mfc

# Submodules that need a framework: imported only when it is importable.
FRAMEWORKS = {"torch": "torch", "jax": "jax", "flower": "flwr"}


def documented(name, doc):
    """Whether ``doc`` documents the parameter ``name`` (see the module)."""
    name = re.escape(name.lstrip("*"))
    entry = rf"(?m)^\s*\**{name}\s*(\([^)\n]*\))?:"
    quoted = rf"`{{1,2}}\**{name}(=[^`]*)?`{{1,2}}"
    return re.search(entry, doc or "") is not None or re.search(quoted, doc or "") is not None


def parameters(signature):
    """The names of a signature's parameters, ``self`` and ``cls`` dropped."""
    return [p for p in signature.parameters if p not in ("self", "cls")]


def public(obj):
    return sorted(n for n in dir(obj) if not n.startswith("_"))


# --- the stubs -------------------------------------------------------------------------------


def stub_callables():
    """``{qualified name: (parameter names, docstring)}`` of the stubs' functions and methods;
    a class's entry is its ``__init__``'s parameters with the class's and ``__init__``'s
    docstrings."""
    tree = ast.parse(Path(mfc.__file__).with_name("_mfc.pyi").read_text())

    def names(fn):
        a = fn.args
        every = a.posonlyargs + a.args + a.kwonlyargs
        every += [x for x in (a.vararg, a.kwarg) if x is not None]
        return [x.arg for x in every if x.arg not in ("self", "cls")]

    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = (names(node), ast.get_docstring(node) or "")
        elif isinstance(node, ast.ClassDef):
            class_doc = ast.get_docstring(node) or ""
            out[node.name] = ([], class_doc)
            for item in node.body:
                if not isinstance(item, ast.FunctionDef):
                    continue
                if item.name == "__init__":
                    out[node.name] = (names(item), class_doc + "\n" + (ast.get_docstring(item) or ""))
                elif not item.name.startswith("_") and not any(
                    isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
                ):
                    out[f"{node.name}.{item.name}"] = (names(item), ast.get_docstring(item) or "")
    return out


def extension_callables():
    """``{qualified name: (parameter names, runtime __doc__)}`` of the extension module's public
    functions, classes (their constructor's parameters) and methods; exceptions and properties
    take no parameters and are left out."""
    out = {}
    for name in public(_mfc):
        obj = getattr(_mfc, name)
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue
            try:
                constructor = parameters(inspect.signature(obj))
            except ValueError:  # no constructor (``Mechanism``: ``compile``, ``load``, ...)
                constructor = []
            out[name] = (constructor, obj.__doc__)
            for member in public(obj):
                attr = inspect.getattr_static(obj, member)
                if isinstance(attr, (property, type(type.__dict__["__dict__"]))):
                    continue  # a property: no parameters
                method = getattr(obj, member)
                if callable(method):
                    out[f"{name}.{member}"] = (parameters(inspect.signature(method)), method.__doc__)
        elif callable(obj):
            out[name] = (parameters(inspect.signature(obj)), obj.__doc__)
    return out


def test_the_stubs_parameters_are_the_runtime_signatures():
    stubs = stub_callables()
    runtime = extension_callables()
    assert set(runtime) <= set(stubs), set(runtime) - set(stubs)
    for name, (params, _) in runtime.items():
        assert stubs[name][0] == params, (name, stubs[name][0], params)


@pytest.mark.parametrize("name", sorted(extension_callables()))
def test_every_parameter_of_the_extension_is_documented_at_runtime_and_in_the_stub(name):
    params, doc = extension_callables()[name]
    stub_params, stub_doc = stub_callables()[name]
    missing = [p for p in params if not documented(p, doc)]
    assert not missing, f"help(mfc.{name}) does not document {missing}"
    missing = [p for p in stub_params if not documented(p, stub_doc)]
    assert not missing, f"the stub of mfc.{name} does not document {missing}"


# --- the pure-Python modules -----------------------------------------------------------------


def python_modules():
    """The installed package's pure-Python submodules, a framework module only when its
    framework is importable."""
    out = []
    for info in pkgutil.iter_modules(mfc.__path__):
        if info.name.startswith("_"):
            continue
        framework = FRAMEWORKS.get(info.name)
        if framework is not None and importlib.util.find_spec(framework) is None:
            continue
        out.append(importlib.import_module(f"mfc.{info.name}"))
    return out


def python_callables():
    """``{qualified name: (parameter names, runtime __doc__)}`` of the public functions and
    classes (``__all__``, else the public names the module defines) of every pure-Python
    submodule, and of the public methods of those classes."""
    out = {}
    for module in python_modules():
        names = getattr(module, "__all__", None) or [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        ]
        for name in names:
            obj = getattr(module, name)
            qualified = f"{module.__name__}.{name}"
            if inspect.isclass(obj):
                if issubclass(obj, BaseException):
                    continue
                init = vars(obj).get("__init__")
                doc = (obj.__doc__ or "") + "\n" + ((init.__doc__ or "") if init else "")
                out[qualified] = (parameters(inspect.signature(obj)), doc)
                for member, attr in vars(obj).items():
                    if member.startswith("_") or isinstance(attr, property):
                        continue
                    function = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
                    if inspect.isfunction(function):
                        out[f"{qualified}.{member}"] = (
                            parameters(inspect.signature(function)),
                            function.__doc__,
                        )
            elif inspect.isfunction(obj):
                out[qualified] = (parameters(inspect.signature(obj)), obj.__doc__)
    return out


def test_the_pure_python_modules_are_found():
    found = {m.__name__ for m in python_modules()}
    assert {"mfc.sampling", "mfc.training"} <= found, found


@pytest.mark.parametrize("name", sorted(python_callables()))
def test_every_parameter_of_a_pure_python_callable_is_documented(name):
    params, doc = python_callables()[name]
    missing = [p for p in params if not documented(p, doc)]
    assert not missing, f"help({name}) does not document {missing}"


def test_documented_asks_for_an_entry_or_backticks():
    assert documented("seed", "Args:\n    seed: the key.")
    assert documented("shard", "shard (tuple): a range")
    assert documented("released", "``released``: the steps")
    assert documented("allow_unverified", "unless `allow_unverified=True`")
    assert documented("kwargs", "``**kwargs``: passed on")
    assert not documented("seed", "a seed drawn from the OS")
    assert not documented("seed", "``seeds``")
    assert not documented("step", "``step_examples``")

"""The package surface: lazy names resolve, extras stay unloaded, errors are builtins too."""

import subprocess
import sys

import pytest

import roofline as rl


def test_public_names_resolve():
    for name in rl.__all__:
        assert getattr(rl, name) is not None, name
    assert rl.solve.__module__ == "roofline.engine.solve"
    assert "solve" in dir(rl)
    with pytest.raises(AttributeError, match="no attribute"):
        rl.nonexistent  # noqa: B018


def test_import_loads_no_extras():
    code = ("import sys, roofline as rl; rl.solve('resnet18', 'A100'); "
            "print(sorted(m for m in ('matplotlib', 'pandas', 'torch', 'onnx') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_errors_are_builtin_subclasses():
    assert issubclass(rl.SpecError, ValueError) and issubclass(rl.UnknownNameError, KeyError)
    assert issubclass(rl.MissingExtraError, ImportError)

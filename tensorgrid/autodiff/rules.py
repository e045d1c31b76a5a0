"""Imports every rule module so the gradient table is complete."""

import importlib
import pkgutil

import tensorgrid.autodiff as _pkg

for _mod in pkgutil.iter_modules(_pkg.__path__):
    if _mod.name.startswith("rules_"):
        importlib.import_module(f"tensorgrid.autodiff.{_mod.name}")

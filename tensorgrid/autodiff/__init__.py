"""Reverse-mode autodiff: the walk (gradients.py) and one rule per op (rules_*.py)."""

from tensorgrid.autodiff import rules
from tensorgrid.autodiff.gradients import gradients, hessians

__all__ = ["gradients", "hessians"]

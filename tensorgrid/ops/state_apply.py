"""The dense updates of TensorFlow's other v1 optimizers, so graphs that use them import and run:
``ApplyAdadelta``, ``ApplyProximalGradientDescent``, ``ApplyProximalAdagrad``, ``ApplyFtrl`` and
``ApplyFtrlV2`` (TensorFlow's op names, inputs and attrs; refs first, as in ``ops/state.py``)."""

from __future__ import annotations

from tensorgrid.core.registry import op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops.state import _apply as apply_infer

# op: (number of refs, scalar inputs, gradient input)
MORE_APPLY = {
    "ApplyAdadelta": (3, (3, 4, 5), 6),
    "ApplyProximalGradientDescent": (1, (1, 2, 3), 4),
    "ApplyProximalAdagrad": (2, (2, 3, 4), 5),
    "ApplyFtrl": (3, (4, 5, 6, 7), 3),
    "ApplyFtrlV2": (3, (4, 5, 6, 7, 8), 3),
}

for _name, (_refs, _scalars, _grad) in MORE_APPLY.items():
    op(_name, stateful=True, ref_inputs=tuple(range(_refs)), ref_outputs=(0,), foldable=False,
       defaults={"use_locking": False, **({"multiply_linear_by_lr": False}
                                          if _name.startswith("ApplyFtrl") else {})})(
        apply_infer(_refs, list(_scalars), _grad))


declare_attrs({
    "ApplyAdadelta": "T use_locking",
    "ApplyFtrl": "T multiply_linear_by_lr use_locking",
    "ApplyFtrlV2": "T multiply_linear_by_lr use_locking",
    "ApplyProximalAdagrad": "T use_locking",
    "ApplyProximalGradientDescent": "T use_locking",
})

"""``Einsum``: a sum of products over indices named by an equation such as ``"ij,jk->ik"``
(TensorFlow's op name, inputs and attrs: ``equation``, ``N``, ``T``). The equation is parsed
here once; inference, the kernel and the gradient share it. The python API is
``tensorgrid.framework.einsum_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import is_numeric, spec

ELLIPSIS = "."  # ``...`` is held as one character in a parsed subscript


class Equation(NamedTuple):
    inputs: tuple[str, ...]
    output: str


def parse_equation(equation: str) -> Equation:
    """Split an einsum equation into its subscripts, ``...`` becoming ``.``; an implicit output
    holds the letters that appear once, in alphabetical order, after any ``...``.

    Raises:
        ValueError: a character other than letters, ``,``, ``->`` and ``...``, or a repeated
            ``...`` in one operand.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = [p.replace("...", ELLIPSIS) for p in lhs.split(",")]
    for p in parts:
        if p.count(ELLIPSIS) > 1 or any(not (c.isalpha() or c == ELLIPSIS) for c in p):
            raise ValueError(f"invalid einsum subscripts {p!r} in {equation!r}")
    if arrow:
        out = rhs.replace("...", ELLIPSIS)
        if any(not (c.isalpha() or c == ELLIPSIS) for c in out):
            raise ValueError(f"invalid einsum output subscripts {rhs!r} in {equation!r}")
    else:
        letters = "".join(parts).replace(ELLIPSIS, "")
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        out = (ELLIPSIS if any(ELLIPSIS in p for p in parts) else "") + "".join(once)
    return Equation(tuple(parts), out)


def _einsum(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("Einsum needs at least one input")
    dt = ctx.same_dtype()
    if not is_numeric(dt):
        ctx.fail(f"does not support dtype {dt.name}; needs a numeric type")
    try:
        eq = parse_equation(str(ctx.attr("equation")))
    except ValueError as e:
        ctx.fail(str(e))
    if len(eq.inputs) != ctx.num_inputs:
        ctx.fail(f"equation {ctx.attr('equation')!r} names {len(eq.inputs)} operands, "
                 f"got {ctx.num_inputs} inputs")
    sizes: dict[str, int | None] = {}
    ell: list[int | None] | None = []
    for i, sub in enumerate(eq.inputs):
        dims = ctx.shape(i).dims
        if dims is None:
            if ELLIPSIS in sub:
                ell = None
            for c in sub.replace(ELLIPSIS, ""):
                sizes.setdefault(c, None)
            continue
        n_named = len(sub.replace(ELLIPSIS, ""))
        if (ELLIPSIS in sub and len(dims) < n_named) or (ELLIPSIS not in sub and
                                                         len(dims) != n_named):
            ctx.fail(f"operand {i} has shape {ctx.shape(i)}, which does not fit subscripts "
                     f"{sub.replace(ELLIPSIS, '...')!r}")
        pos = sub.find(ELLIPSIS)
        k = len(dims) - n_named
        for j, c in enumerate(sub.replace(ELLIPSIS, "")):
            d = dims[j if pos < 0 or j < pos else j + k]
            known = sizes.get(c)
            if known is not None and d is not None and known != d and 1 not in (known, d):
                ctx.fail(f"dimension {c!r} is {known} in one operand and {d} in operand {i}")
            sizes[c] = d if known is None or known == 1 else known
        if pos >= 0 and ell is not None:
            ell = _broadcast(ell, list(dims[pos:pos + k]))
    out: list[int | None] = []
    for c in eq.output:
        if c == ELLIPSIS:
            if ell is None:
                return [spec(dt, None)]
            out += ell
        elif c not in sizes:
            ctx.fail(f"output subscript {c!r} appears in no operand")
        else:
            out.append(sizes[c])
    return [spec(dt, out)]


def _broadcast(a: list[int | None], b: list[int | None]) -> list[int | None]:
    """Broadcast two partial shapes (None for unknown dims)."""
    if len(a) < len(b):
        a, b = b, a
    pad: list[int | None] = [1] * (len(a) - len(b))
    b = pad + b
    return [y if x == 1 else x if y == 1 else (x if x is not None else y) for x, y in zip(a, b)]


op("Einsum")(_einsum)


declare_attrs({
    "Einsum": "N T equation",
})

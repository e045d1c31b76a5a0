"""The choice of OpenBLAS's kernel set (kernels/blas_core.py): the faster of the picked AVX-512
set and the Haswell one kept by measured time, nothing touched for other sets or without a
switchable OpenBLAS, and a real switch of the loaded OpenBLAS that keeps products right."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tensorgrid.kernels import blas_core


class FakeCore:
    """A kernel set that switches by name, and the names it was switched to."""

    def __init__(self, name: str, known: tuple[str, ...] = ("SkylakeX", "Haswell")) -> None:
        self.current, self.known, self.selected = name, known, []

    def name(self) -> str:
        return self.current

    def select(self, name: str) -> str:
        self.selected.append(name)
        if name in self.known:
            self.current = name
        return self.current


def timings(*seconds: float) -> Iterator[float]:
    return iter(seconds)


def test_the_alternative_is_kept_only_when_it_is_faster_by_the_margin() -> None:
    core = FakeCore("SkylakeX")
    times = timings(1.0, 0.8)  # picked, then Haswell: 20% faster
    assert blas_core.prefer_faster_core(core, lambda: next(times)) == "Haswell"  # type: ignore[arg-type]
    assert core.selected == ["Haswell"]
    core = FakeCore("SkylakeX")
    times = timings(1.0, 0.97)  # 3% faster: within the margin, the picked set stays
    assert blas_core.prefer_faster_core(core, lambda: next(times)) == "SkylakeX"  # type: ignore[arg-type]
    assert core.selected == ["Haswell", "SkylakeX"]


def test_other_sets_and_no_openblas_are_left_alone() -> None:
    def never() -> float:
        raise AssertionError("nothing to measure")

    core = FakeCore("Zen")
    assert blas_core.prefer_faster_core(core, never) == "Zen"  # type: ignore[arg-type]
    assert core.selected == []
    assert blas_core.prefer_faster_core(None, never) is None
    core = FakeCore("SkylakeX", known=("SkylakeX",))  # a build without the Haswell set
    assert blas_core.prefer_faster_core(core, lambda: 1.0) == "SkylakeX"  # type: ignore[arg-type]
    assert core.selected == ["Haswell", "SkylakeX"]


def test_the_loaded_openblas_switches_sets_and_multiplies_right() -> None:
    core = blas_core.openblas_core()
    if core is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS that can switch kernel sets")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((130, 70)), rng.standard_normal((70, 90))
    want = np.einsum("ik,kj->ij", a, b)  # no BLAS
    start = core.name()
    try:
        for name in ("Haswell", start):
            assert core.select(name).lower() == name.lower()
            np.testing.assert_allclose(a @ b, want, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(a.astype(np.float32) @ b.astype(np.float32), want,
                                       rtol=1e-4, atol=1e-4)
    finally:
        core.select(start)
    assert core.name() == start
    assert blas_core.product_seconds(repeats=1) > 0

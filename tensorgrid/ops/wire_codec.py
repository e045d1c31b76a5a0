"""Lossless compression on the wire: ``_WireEncode`` and ``_WireDecode``, which the partitioner
puts around the Send/Recv of a cross-task edge its wire policy selects (``compiler/wire.py``).

``_WireEncode`` turns any numeric tensor into a self-describing frame (a uint8 vector: a header
with the dtype and shape, then blosc2 chunks compressed with a byte or bit shuffle filter and the
chosen codec); ``_WireDecode`` turns a frame back into the exact tensor (the frame carries the
shape, so the decoder needs no static one). Kernels: ``tensorgrid/kernels/wire_codec.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.dtypes import DType
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

# the codecs a policy may name (TF1's rpc_options.compression_algorithm "deflate"/"gzip" is zlib's
# deflate stream, mapped onto "zlib" by the policy)
CODECS = ("lz4", "lz4hc", "zstd", "zlib")
# the shuffle filters: "bitshuffle" regroups the bits of each element (best for floats with LZ4),
# "shuffle" their bytes (best with ZSTD), "none" leaves them in place
SHUFFLES = ("shuffle", "bitshuffle", "none")


def encodable(dt: DType) -> bool:
    """Whether tensors of ``dt`` can travel as wire frames: fixed-size numeric and bool types."""
    return dt.is_floating or dt.is_integer or dt.is_complex or dt is dtypes.bool_


@op("_WireEncode", defaults={"level": 1, "shuffle": "bitshuffle", "blocksize": 0})
def _wire_encode(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dt = ctx.dtype(0)
    if not encodable(dt):
        ctx.fail(f"cannot encode a {dt.name} tensor (numeric and bool types only)")
    if ctx.attr("codec") not in CODECS:
        ctx.fail(f"unknown codec {ctx.attr('codec')!r}; one of {', '.join(CODECS)}")
    if ctx.attr("shuffle") not in SHUFFLES:
        ctx.fail(f"unknown shuffle {ctx.attr('shuffle')!r}; one of {', '.join(SHUFFLES)}")
    if not 0 <= int(ctx.attr("level")) <= 9:
        ctx.fail(f"level must be in 0..9, got {ctx.attr('level')}")
    if int(ctx.attr("blocksize")) < 0:
        ctx.fail(f"blocksize must be >= 0 (0: the codec's choice), got {ctx.attr('blocksize')}")
    return [spec(dtypes.uint8, [None])]


@op("_WireDecode", defaults={"shape": TensorShape(None)})
def _wire_decode(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if ctx.dtype(0) is not dtypes.uint8:
        ctx.fail(f"decodes a uint8 frame, got {ctx.dtype(0).name}")
    dt = dtypes.as_dtype(ctx.attr("T"))
    if not encodable(dt):
        ctx.fail(f"cannot decode to a {dt.name} tensor (numeric and bool types only)")
    return [spec(dt, as_shape(ctx.attr("shape")))]


declare_attrs({
    "_WireEncode": "T codec:string level:int shuffle:string blocksize:int",
    "_WireDecode": "T shape",
})

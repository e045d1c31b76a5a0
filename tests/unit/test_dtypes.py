"""Data types: every dtype survives a constant and a feed through a Session with its dtype kept;
``as_dtype`` conversions; TensorFlow's enum numbers; lossy constant conversions raise TypeError."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import dtypes, errors

# One distinctive value per dtype (extremes where they exist).
VALUES = {
    tf.float16: np.array([1.5, -2.0, 65504.0], np.float16),
    tf.bfloat16: np.array([1.5, -2.0, 3.0e38], ml_dtypes.bfloat16),
    tf.float32: np.array([1.5, -2.0, 3.4e38], np.float32),
    tf.float64: np.array([1.5, -2.0, 1.0e308], np.float64),
    tf.int8: np.array([-128, 0, 127], np.int8),
    tf.int16: np.array([-32768, 0, 32767], np.int16),
    tf.int32: np.array([-(2**31), 0, 2**31 - 1], np.int32),
    tf.int64: np.array([-(2**63), 0, 2**63 - 1], np.int64),
    tf.uint8: np.array([0, 1, 255], np.uint8),
    tf.uint16: np.array([0, 1, 65535], np.uint16),
    tf.uint32: np.array([0, 1, 2**32 - 1], np.uint32),
    tf.uint64: np.array([0, 1, 2**64 - 1], np.uint64),
    tf.bool: np.array([True, False, True]),
    tf.complex64: np.array([1 + 2j, -3j, 0], np.complex64),
    tf.complex128: np.array([1 + 2j, -3j, 1e300], np.complex128),
    tf.string: np.array([b"ab", b"\xff\x00", b""], dtype=object),
}

# TensorFlow's DataType enum numbers.
ENUMS = {
    tf.float32: 1, tf.float64: 2, tf.int32: 3, tf.uint8: 4, tf.int16: 5, tf.int8: 6, tf.string: 7,
    tf.complex64: 8, tf.int64: 9, tf.bool: 10, tf.bfloat16: 14, tf.uint16: 17, tf.complex128: 18,
    tf.float16: 19, tf.resource: 20, tf.uint32: 22, tf.uint64: 23,
}


@pytest.mark.parametrize("dt", list(VALUES), ids=lambda d: d.name)
def test_constant_and_feed_round_trip_keep_dtype(dt: tf.DType) -> None:
    value = VALUES[dt]
    const = tf.constant(value)
    typed = tf.constant(value, dtype=dt)
    ph = tf.placeholder(dt, [None], name="p")
    scalar = tf.constant(value[0], dtype=dt)
    assert const.dtype is dt and typed.dtype is dt and scalar.dtype is dt
    with tf.Session() as sess:
        outs = sess.run([const, typed, ph, tf.identity(ph)], {ph: value})
        for out in outs:
            assert out.dtype == value.dtype
            np.testing.assert_array_equal(out, value)
        s = sess.run(scalar)
    if dt is tf.string:
        assert s == b"ab"
    else:
        assert isinstance(s, np.generic) and s.dtype == value.dtype and s == value[0]


def test_strings_are_bytes() -> None:
    ph = tf.placeholder(tf.string, [None])
    with tf.Session() as sess:
        assert sess.run(tf.constant("héllo")) == "héllo".encode()
        np.testing.assert_array_equal(sess.run(tf.constant(["a", "b"])), [b"a", b"b"])
        got = sess.run(ph, {ph: ["x", b"y", "é"]})
        assert got.tolist() == [b"x", b"y", "é".encode()]
        assert sess.run(ph, {ph: np.array(["u", "v"])}).tolist() == [b"u", b"v"]
        scalar = tf.placeholder(tf.string, [])
        assert sess.run(scalar, {scalar: "s"}) == b"s"
        assert sess.run(tf.identity(scalar), {scalar: b"t"}) == b"t"


@pytest.mark.parametrize("dt,enum", list(ENUMS.items()), ids=lambda x: getattr(x, "name", str(x)))
def test_tensorflow_enum_numbers(dt: tf.DType, enum: int) -> None:
    assert dt.as_datatype_enum == enum
    assert tf.as_dtype(enum) is dt
    if dt is not tf.resource:
        assert tf.as_dtype(enum + 100) is dt  # TensorFlow's reference types
    assert tf.as_dtype(dtypes.proto_name(dt)) is dt


def test_as_dtype_conversions() -> None:
    assert tf.as_dtype("float32") is tf.float32
    assert tf.as_dtype("float") is tf.float32
    assert tf.as_dtype("half") is tf.float16
    assert tf.as_dtype("double") is tf.float64
    assert tf.as_dtype("DT_FLOAT") is tf.float32
    assert tf.as_dtype("DT_HALF") is tf.float16
    assert tf.as_dtype("DT_BFLOAT16") is tf.bfloat16
    assert tf.as_dtype(np.float64) is tf.float64
    assert tf.as_dtype(np.dtype("int16")) is tf.int16
    assert tf.as_dtype(ml_dtypes.bfloat16) is tf.bfloat16
    assert tf.as_dtype(np.bool_) is tf.bool
    assert tf.as_dtype(float) is tf.float32
    assert tf.as_dtype(int) is tf.int32
    assert tf.as_dtype(bool) is tf.bool
    assert tf.as_dtype(complex) is tf.complex128
    assert tf.as_dtype(str) is tf.string and tf.as_dtype(bytes) is tf.string
    assert tf.as_dtype(np.dtype("S3")) is tf.string
    assert tf.as_dtype(tf.int8) is tf.int8
    assert dtypes.proto_name(tf.float64) == "DT_DOUBLE"
    for bad, message in (("floaty", "Unknown data type name 'floaty'"),
                         (99, "Unknown data type enum 99"),
                         (np.dtype("datetime64[s]"), "no tensorgrid equivalent")):
        with pytest.raises(TypeError, match=message):
            tf.as_dtype(bad)


def test_dtype_properties_and_equality() -> None:
    assert tf.float32 == "float32" and tf.float32 == np.float32 and tf.float32 != tf.float64
    assert tf.float32 != "not a type"
    assert tf.float16.is_floating and tf.bfloat16.is_floating and not tf.int8.is_floating
    assert tf.uint8.is_unsigned and tf.uint8.is_integer and not tf.int8.is_unsigned
    assert tf.complex64.is_complex and tf.complex64.real_dtype is tf.float32
    assert tf.bool.is_bool and not tf.bool.is_numeric
    assert tf.float32.is_differentiable and not tf.int32.is_differentiable
    assert (tf.int8.min, tf.int8.max, tf.uint16.max) == (-128, 127, 65535)
    assert float(tf.bfloat16.max) == pytest.approx(3.3895e38, rel=1e-3)
    assert (tf.float64.size, tf.float16.size, tf.string.size) == (8, 2, 0)
    assert tf.float32.as_numpy_dtype is np.float32
    assert repr(tf.float32) == "tf.float32"
    assert len({tf.float32, tf.as_dtype("float32"), tf.as_dtype(1)}) == 1
    import copy

    assert copy.deepcopy(tf.int64) is tf.int64


def test_python_values_get_tensorflow_default_dtypes() -> None:
    assert tf.constant(1.5).dtype is tf.float32
    assert tf.constant(1).dtype is tf.int32
    assert tf.constant(2**40).dtype is tf.int64
    assert tf.constant([1, 2**40]).dtype is tf.int64
    assert tf.constant(True).dtype is tf.bool
    assert tf.constant(1j).dtype is tf.complex128
    assert tf.constant([1, 2.5]).dtype is tf.float32
    assert tf.constant([]).dtype is tf.float32
    assert tf.constant(np.float16(1)).dtype is tf.float16
    assert tf.constant(np.arange(3)).dtype is tf.int64
    assert tf.constant(3, dtype=tf.float64).dtype is tf.float64


@pytest.mark.parametrize("value,dt,message", [
    (1.5, tf.int32, "Expected int32"),
    ([1, 2.5], tf.int64, "Expected int64"),
    (300, tf.int8, "out of range for int8"),
    (-1, tf.uint8, "out of range for uint8"),
    (2**31, tf.int32, "out of range for int32"),
    (1 + 2j, tf.float32, "complex"),
    ("a", tf.float32, "Expected float32"),
    (1, tf.bool, "Expected bool"),
])
def test_lossy_constant_conversions_raise_type_error(value: object, dt: tf.DType,
                                                     message: str) -> None:
    with pytest.raises(TypeError, match=message):
        tf.constant(value, dtype=dt)


def test_constant_shape_broadcast_and_verify() -> None:
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(tf.constant(7, shape=[2, 2])), [[7, 7], [7, 7]])
        np.testing.assert_array_equal(sess.run(tf.constant([1, 2, 3, 4], shape=[2, 2])),
                                      [[1, 2], [3, 4]])
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        tf.constant([1, 2], shape=[2, 1], verify_shape=True)
    with pytest.raises(ValueError, match="Cannot reshape"):
        tf.constant([1, 2, 3], shape=[2, 2])


def test_feeding_a_wrong_dtype_is_an_invalid_argument() -> None:
    ints = tf.placeholder(tf.int32, [None], name="ints")
    flags = tf.placeholder(tf.bool, [], name="flags")
    small = tf.placeholder(tf.int8, [None], name="small")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match="dtype float64 for Tensor 'ints:0', which has dtype int32"):
            sess.run(ints, {ints: np.array([1.5])})
        with pytest.raises(errors.InvalidArgumentError, match="'flags:0'.*dtype bool"):
            sess.run(flags, {flags: 1})
        with pytest.raises(errors.InvalidArgumentError, match="'small:0'.*out of range.*int8"):
            sess.run(small, {small: [300]})
        # widening python ints and float32 arrays into float placeholders is fine
        f = tf.placeholder(tf.float64, [None])
        np.testing.assert_array_equal(sess.run(f, {f: [1, 2]}), [1.0, 2.0])
        assert sess.run(f, {f: np.array([0.5], np.float32)}).dtype == np.float64

"""tf.gfile / tf.io.gfile over local files: TensorFlow's names and errors."""

from __future__ import annotations

import pytest

import tensorgrid as tf
from tensorgrid.core import errors


def test_files_and_directories(tmp_path):
    root = tmp_path / "data"
    tf.gfile.MakeDirs(str(root / "sub"))
    tf.gfile.MakeDirs(str(root / "sub"))  # exists: nothing to do
    with tf.gfile.GFile(str(root / "a.txt"), "w") as f:
        f.write("h\u00e9llo\n")
    with tf.io.gfile.GFile(str(root / "a.txt"), "rb") as f:
        assert f.read() == "h\u00e9llo\n".encode()
    assert tf.gfile.Exists(str(root / "a.txt")) and tf.io.gfile.isdir(str(root / "sub"))
    assert tf.gfile.ListDirectory(str(root)) == ["a.txt", "sub"]
    tf.gfile.Copy(str(root / "a.txt"), str(root / "b.txt"))
    assert tf.gfile.Glob(str(root / "*.txt")) == [str(root / "a.txt"), str(root / "b.txt")]
    with pytest.raises(errors.AlreadyExistsError):
        tf.gfile.Rename(str(root / "a.txt"), str(root / "b.txt"))
    tf.gfile.Rename(str(root / "a.txt"), str(root / "b.txt"), overwrite=True)
    assert tf.gfile.Stat(str(root / "b.txt")).length == len("h\u00e9llo\n".encode())
    assert [d for d, _, _ in tf.gfile.Walk(str(root))] == [str(root), str(root / "sub")]
    tf.gfile.Remove(str(root / "b.txt"))
    tf.gfile.DeleteRecursively(str(root))
    assert not tf.gfile.Exists(str(root))


def test_missing_paths_raise_tensorflows_errors(tmp_path):
    missing = str(tmp_path / "none")
    for call in (lambda: tf.gfile.GFile(missing), lambda: tf.gfile.Remove(missing),
                 lambda: tf.gfile.Stat(missing), lambda: tf.gfile.ListDirectory(missing),
                 lambda: tf.gfile.DeleteRecursively(missing),
                 lambda: tf.gfile.MkDir(str(tmp_path / "x" / "y"))):
        with pytest.raises(errors.NotFoundError):
            call()
    with pytest.raises(errors.AlreadyExistsError):
        tf.gfile.MkDir(str(tmp_path))

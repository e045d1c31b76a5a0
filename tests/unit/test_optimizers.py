"""Optimizers: each one's updates over several steps against a numpy reference of the same formula
(float64), slot names and placement, the global step, compute/apply/minimize semantics and errors,
the size of the emitted graph, and the learning-rate schedules."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client import train
from tensorgrid.core import dtypes
from tensorgrid.framework.graph import GraphKeys

STEPS = 4
RNG = np.random.default_rng(7)
INIT = RNG.standard_normal((3, 2))
GRADS = [RNG.standard_normal((3, 2)) for _ in range(STEPS)]


def _run_steps(opt: train.Optimizer, init: np.ndarray = INIT,
               grads: list[np.ndarray] = GRADS, dtype: np.dtype = np.float64,
               feed: dict | None = None) -> tuple[list[np.ndarray], tf.Variable, tf.Operation]:
    """Apply the fed gradients one step at a time; return the variable's value after each."""
    var = tf.Variable(init.astype(dtype), name="w")
    grad = tf.placeholder(tf.as_dtype(dtype), init.shape, name="g")
    train_op = opt.apply_gradients([(grad, var)])
    seen = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for g in grads:
            sess.run(train_op, {grad: g.astype(dtype), **(feed or {})})
            seen.append(sess.run(var))
    return seen, var, train_op


def _assert_track(got: list[np.ndarray], want: list[np.ndarray], rtol: float = 1e-12) -> None:
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-13, err_msg=f"step {step + 1}")


# ------------------------------------------------------------------------------ numpy references


def ref_sgd(lr: float) -> list[np.ndarray]:
    var, out = INIT.copy(), []
    for g in GRADS:
        var = var - lr * g
        out.append(var)
    return out


def ref_momentum(lr: float, mu: float, nesterov: bool) -> list[np.ndarray]:
    var, acc, out = INIT.copy(), np.zeros_like(INIT), []
    for g in GRADS:
        acc = mu * acc + g
        var = var - (lr * g + lr * mu * acc if nesterov else lr * acc)
        out.append(var)
    return out


def ref_adam(lr: float, b1: float, b2: float, eps: float) -> list[np.ndarray]:
    var, m, v, out = INIT.copy(), np.zeros_like(INIT), np.zeros_like(INIT), []
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
        var = var - lr_t * m / (np.sqrt(v) + eps)
        out.append(var)
    return out


def ref_adagrad(lr: float, init_acc: float) -> list[np.ndarray]:
    var, acc, out = INIT.copy(), np.full_like(INIT, init_acc), []
    for g in GRADS:
        acc = acc + g * g
        var = var - lr * g / np.sqrt(acc)
        out.append(var)
    return out


def ref_rmsprop(lr: float, decay: float, mu: float, eps: float, centered: bool) -> list[np.ndarray]:
    var, ms, mg, mom, out = INIT.copy(), np.ones_like(INIT), np.zeros_like(INIT), \
        np.zeros_like(INIT), []
    for g in GRADS:
        ms = decay * ms + (1 - decay) * g * g
        denom = ms + eps
        if centered:
            mg = decay * mg + (1 - decay) * g
            denom = ms - mg * mg + eps
        mom = mu * mom + lr * g / np.sqrt(denom)
        var = var - mom
        out.append(var)
    return out


# ------------------------------------------------------------------------------ update values


def test_gradient_descent_matches_reference():
    got, _, _ = _run_steps(train.GradientDescentOptimizer(0.1))
    _assert_track(got, ref_sgd(0.1))


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_reference(nesterov):
    got, _, _ = _run_steps(train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov))
    _assert_track(got, ref_momentum(0.05, 0.9, nesterov))


def test_adam_matches_reference():
    got, _, _ = _run_steps(train.AdamOptimizer(0.01, beta1=0.8, beta2=0.95, epsilon=1e-6))
    _assert_track(got, ref_adam(0.01, 0.8, 0.95, 1e-6))


def test_adam_beta_powers_advance_after_each_step():
    opt = train.AdamOptimizer(0.01, beta1=0.8, beta2=0.95)
    _, var, train_op = _run_steps(opt, grads=GRADS[:1])
    b1p, b2p = opt._get_beta_accumulators(var.graph)
    assert b1p.op.name == "beta1_power" and b2p.op.name == "beta2_power"
    assert not b1p.trainable and b1p in tf.global_variables()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(b1p) == pytest.approx(0.8)
        g = var.graph.get_tensor_by_name("g:0")
        for _ in range(3):
            sess.run(train_op, {g: GRADS[0]})
        assert sess.run(b1p) == pytest.approx(0.8**4)
        assert sess.run(b2p) == pytest.approx(0.95**4)


def test_adagrad_matches_reference():
    got, _, _ = _run_steps(train.AdagradOptimizer(0.3, initial_accumulator_value=0.2))
    _assert_track(got, ref_adagrad(0.3, 0.2))


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_matches_reference(centered):
    opt = train.RMSPropOptimizer(0.01, decay=0.85, momentum=0.5, epsilon=1e-4, centered=centered)
    got, _, _ = _run_steps(opt)
    _assert_track(got, ref_rmsprop(0.01, 0.85, 0.5, 1e-4, centered))


def test_hyper_parameters_may_be_tensors_of_another_dtype():
    lr = tf.placeholder(tf.float32, [], name="lr")
    mu = tf.constant(0.9, tf.float32)
    got, _, _ = _run_steps(train.MomentumOptimizer(lr, mu), feed={lr: np.float32(0.05)})
    # the float32 hyper-parameters are cast to the variable's float64
    want = ref_momentum(float(np.float32(0.05)), float(np.float32(0.9)), False)
    _assert_track(got, want)


def test_float32_variables_update_in_float32():
    got, var, _ = _run_steps(train.GradientDescentOptimizer(0.1), dtype=np.float32)
    assert var.dtype is tf.float32 and got[-1].dtype == np.float32
    _assert_track(got, ref_sgd(0.1), rtol=1e-5)


# ------------------------------------------------------------------------------ slots


@pytest.mark.parametrize("opt_fn, slots", [
    (lambda: train.MomentumOptimizer(0.1, 0.9), {"momentum": "w/Momentum"}),
    (lambda: train.AdamOptimizer(), {"m": "w/Adam", "v": "w/Adam_1"}),
    (lambda: train.AdagradOptimizer(0.1), {"accumulator": "w/Adagrad"}),
    (lambda: train.RMSPropOptimizer(0.1), {"rms": "w/RMSProp", "momentum": "w/RMSProp_1"}),
    (lambda: train.RMSPropOptimizer(0.1, centered=True),
     {"rms": "w/RMSProp", "mg": "w/RMSProp_1", "momentum": "w/RMSProp_2"}),
])
def test_slot_names_and_placement(opt_fn, slots):
    opt = opt_fn()
    with tf.device("/job:ps/task:1"):
        var = tf.Variable(np.zeros((2, 2)), name="w")
    with tf.device("/job:worker/task:0"):
        grad = tf.constant(np.ones((2, 2)))
        train_op = opt.apply_gradients([(grad, var)])
    assert opt.get_slot_names() == sorted(slots)
    for slot_name, var_name in slots.items():
        slot = opt.get_slot(var, slot_name)
        assert slot is not None and slot.op.name == var_name
        assert slot.device == var.device and var.device.startswith("/job:ps") and "task:1" in var.device
        assert slot.op.colocation_groups() == ["loc:@w"]
        assert not slot.trainable
        assert slot in tf.global_variables() and slot not in tf.trainable_variables()
        assert slot.shape == var.shape and slot.dtype is var.dtype
    assert opt.get_slot(var, "nonexistent") is None
    update = [op for op in var.graph.get_operations() if op.type.startswith("Apply")]
    assert len(update) == 1 and update[0].device == var.device
    assert update[0].name.startswith(f"{opt.get_name()}/update_w/")
    assert train_op.name == opt.get_name()
    assert sorted(v.name for v in opt.variables()) == sorted(
        [f"{n}:0" for n in slots.values()]
        + (["beta1_power:0", "beta2_power:0"] if isinstance(opt, train.AdamOptimizer) else []))


def test_slot_initial_values():
    var = tf.Variable(np.full((2,), 5.0), name="w")
    rms = train.RMSPropOptimizer(0.1)
    ada = train.AdagradOptimizer(0.1, initial_accumulator_value=0.25)
    grad = tf.constant(np.ones(2))
    rms.apply_gradients([(grad, var)])
    ada.apply_gradients([(grad, var)])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(rms.get_slot(var, "rms")), [1.0, 1.0])
        np.testing.assert_array_equal(sess.run(rms.get_slot(var, "momentum")), [0.0, 0.0])
        np.testing.assert_array_equal(sess.run(ada.get_slot(var, "accumulator")), [0.25, 0.25])


def test_slots_are_made_once_across_apply_calls():
    opt = train.MomentumOptimizer(0.1, 0.9)
    var = tf.Variable(np.zeros(2), name="w")
    opt.apply_gradients([(tf.constant(np.ones(2)), var)])
    first = opt.get_slot(var, "momentum")
    opt.apply_gradients([(tf.constant(np.ones(2)), var)])
    assert opt.get_slot(var, "momentum") is first
    assert len([v for v in tf.global_variables() if "Momentum" in v.name]) == 1


def test_adam_beta_powers_sit_with_the_first_variable_by_name():
    with tf.device("/job:ps/task:0"):
        b = tf.Variable(np.zeros(2), name="b_var")
    with tf.device("/job:ps/task:1"):
        a = tf.Variable(np.zeros(2), name="a_var")
    opt = train.AdamOptimizer()
    opt.apply_gradients([(tf.constant(np.ones(2)), b), (tf.constant(np.ones(2)), a)])
    b1p, b2p = opt._get_beta_accumulators(a.graph)
    assert b1p.device == b2p.device == a.device
    assert b1p.op.colocation_groups() == ["loc:@a_var"]
    assert b1p.dtype is tf.float64


def test_slots_get_the_variable_name_even_inside_a_name_scope():
    var = tf.Variable(np.zeros(2), name="w")
    with tf.name_scope("training"):
        opt = train.MomentumOptimizer(0.1, 0.9)
        op = opt.apply_gradients([(tf.constant(np.ones(2)), var)])
    assert opt.get_slot(var, "momentum").op.name == "w/Momentum"
    assert op.name == "training/Momentum"


# ------------------------------------------------------------------------------ global step


def test_global_step_increments_once_per_apply_after_the_updates():
    with tf.device("/job:ps/task:0"):
        step = train.get_or_create_global_step()
    with tf.device("/job:ps/task:1"):
        var = tf.Variable(np.zeros(2), name="w")
    opt = train.GradientDescentOptimizer(1.0)
    train_op = opt.apply_gradients([(tf.constant(np.ones(2)), var)], global_step=step)
    assert train_op.type == "AssignAdd" and train_op.name == "GradientDescent"
    assert train_op.device == step.device and step.device.startswith("/job:ps")
    # the increment waits on the group of the updates (directly or through its input)
    gate = var.graph.get_operation_by_name("GradientDescent/update")
    assert gate in train_op.control_inputs + [c for t in train_op.inputs
                                              for c in t.op.control_inputs]
    assert gate.type == "NoOp"
    assert [c.type for c in gate.control_inputs] == ["ApplyGradientDescent"]
    assert train_op in tf.get_collection(GraphKeys.TRAIN_OP)
    # one local process stands in for the ps tasks
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(1, 4):
            sess.run(train_op)
            assert train.global_step(sess, step) == i
        np.testing.assert_array_equal(sess.run(var), [-3.0, -3.0])


def test_global_step_creation_and_lookup():
    assert train.get_global_step() is None
    step = train.create_global_step()
    assert step.op.name == "global_step" and step.name == "global_step:0"
    assert step.dtype is tf.int64 and step.shape.rank == 0 and not step.trainable
    assert step in tf.get_collection(GraphKeys.GLOBAL_STEP)
    assert step in tf.global_variables() and step not in tf.trainable_variables()
    assert train.get_global_step() is step
    assert train.get_or_create_global_step() is step
    with pytest.raises(ValueError, match='"global_step" already exists'):
        train.create_global_step()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        value = train.global_step(sess, step)
        assert value == 0 and isinstance(value, int)


def test_global_step_found_by_name_and_checked():
    g = tf.Graph()
    with g.as_default():
        tf.Variable(np.int64(0), name="global_step", trainable=False)
    found = train.get_global_step(g)
    assert found.name == "global_step:0"
    g2 = tf.Graph()
    with g2.as_default():
        tf.Variable(0.0, name="global_step")
    with pytest.raises(TypeError, match="does not have integer type"):
        train.get_global_step(g2)
    with pytest.raises(TypeError, match="is not scalar"):
        train.assert_global_step(tf.constant([1, 2]))
    with pytest.raises(TypeError, match="must be a Variable or Tensor"):
        train.assert_global_step(3)


def test_global_step_is_created_at_the_root_scope_on_the_current_device():
    with tf.name_scope("outer"), tf.device("/job:ps/task:2"):
        step = train.get_or_create_global_step()
    assert step.op.name == "global_step"
    assert step.device.startswith("/job:ps") and "task:2" in step.device


# ------------------------------------------------------------------------------ API semantics


def test_apply_gradients_with_no_gradients_fails():
    var = tf.Variable(np.zeros(2), name="w")
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        train.GradientDescentOptimizer(0.1).apply_gradients([(None, var)])
    with pytest.raises(ValueError, match="No variables provided"):
        train.GradientDescentOptimizer(0.1).apply_gradients([])


def test_apply_gradients_skips_none_pairs():
    a = tf.Variable(np.zeros(2), name="a")
    b = tf.Variable(np.zeros(2), name="b")
    opt = train.MomentumOptimizer(1.0, 0.5)
    op = opt.apply_gradients([(tf.constant(np.ones(2)), a), (None, b)])
    assert opt.get_slot(b, "momentum") is None
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(op)
        np.testing.assert_array_equal(sess.run(a), [-1.0, -1.0])
        np.testing.assert_array_equal(sess.run(b), [0.0, 0.0])


def test_compute_gradients_defaults_to_trainables_and_keeps_none_pairs():
    w = tf.Variable(np.array([2.0, 3.0]), name="w")
    unused = tf.Variable(np.array([1.0]), name="unused")
    tf.Variable(np.array([1.0]), name="frozen", trainable=False)
    loss = tf.reduce_sum(w * w)
    pairs = train.GradientDescentOptimizer(0.1).compute_gradients(loss)
    assert [v for _, v in pairs] == [w, unused]
    assert pairs[1][0] is None
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(pairs[0][0]), [4.0, 6.0])
    only = train.GradientDescentOptimizer(0.1).compute_gradients(loss, var_list=[w])
    assert [v for _, v in only] == [w]


def test_compute_gradients_gate_graph_and_grad_loss():
    w = tf.Variable(np.array([2.0, 3.0]), name="w")
    loss = tf.reduce_sum(w * w)
    opt = train.GradientDescentOptimizer(0.1)
    pairs = opt.compute_gradients(loss, gate_gradients=train.Optimizer.GATE_GRAPH,
                                  grad_loss=tf.constant(0.5, tf.float64))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(pairs[0][0]), [2.0, 3.0])
    with pytest.raises(ValueError, match="gate_gradients must be one of"):
        opt.compute_gradients(loss, gate_gradients=7)


def test_compute_gradients_rejects_bad_dtypes_and_empty_var_lists():
    v = tf.Variable(np.array([1, 2], np.int32), name="ints")
    opt = train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="Invalid type int32"):
        opt.compute_gradients(tf.reduce_sum(v))
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="No variables to optimize"):
            opt.compute_gradients(tf.constant(1.0))


def test_minimize_with_no_connected_variable_fails():
    tf.Variable(np.zeros(2), name="w")
    loss = tf.reduce_sum(tf.constant(np.ones(2)) * tf.constant(np.ones(2)))
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        train.GradientDescentOptimizer(0.1).minimize(loss)


def test_constructor_errors():
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="Must specify the optimizer name"):
        train.GradientDescentOptimizer(0.1, name="")


def test_emitted_graph_is_small():
    vars_ = [tf.Variable(np.zeros(3), name=f"v{i}") for i in range(4)]
    grads = [tf.constant(np.ones(3)) for _ in vars_]
    before = len(tf.get_default_graph().get_operations())
    train.MomentumOptimizer(0.1, 0.9).apply_gradients(list(zip(grads, vars_)))
    added = tf.get_default_graph().get_operations()[before:]
    kinds = [op.type for op in added]
    # 4 slots x 4 ops (VariableV2, Assign, read, initial value) are init-time only; per step:
    # one Apply per variable, one Const per hyper-parameter and the group
    step_ops = [op for op in added if not op.name.startswith(tuple(f"v{i}/" for i in range(4)))]
    assert sorted(op.type for op in step_ops) == sorted(
        ["ApplyMomentum"] * 4 + ["Const", "Const", "NoOp"]), kinds


def test_constraint_runs_after_the_update():
    var = tf.Variable(np.array([0.5, -0.5]), name="w",
                      constraint=lambda t: tf.maximum(t, tf.constant(0.0, tf.float64)))
    op = train.GradientDescentOptimizer(1.0).apply_gradients(
        [(tf.constant(np.array([1.0, -1.0])), var)])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(op)
        np.testing.assert_allclose(sess.run(var), [0.0, 0.5])


# ------------------------------------------------------------------------------ training


@pytest.mark.parametrize("opt_fn, steps", [
    (lambda: train.GradientDescentOptimizer(0.1), 200),
    (lambda: train.MomentumOptimizer(0.05, 0.9), 200),
    (lambda: train.AdamOptimizer(0.1), 300),
    (lambda: train.RMSPropOptimizer(0.02), 400),
    (lambda: train.AdagradOptimizer(0.5), 300),
])
def test_minimize_fits_a_linear_regression(opt_fn, steps):
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((32, 3))
    w_true = np.array([[1.5], [-2.0], [0.5]])
    y_np = x_np @ w_true + 0.25
    x = tf.placeholder(tf.float64, [None, 3], name="x")
    y = tf.placeholder(tf.float64, [None, 1], name="y")
    w = tf.Variable(np.zeros((3, 1)), name="w")
    b = tf.Variable(np.zeros(1), name="b")
    err = tf.matmul(x, w) + b - y
    loss = tf.reduce_sum(err * err) * tf.constant(1.0 / 32, tf.float64)
    step = train.get_or_create_global_step()
    train_op = opt_fn().minimize(loss, global_step=step)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: x_np, y: y_np})
        for _ in range(steps):
            sess.run(train_op, {x: x_np, y: y_np})
        last = sess.run(loss, {x: x_np, y: y_np})
        assert train.global_step(sess, step) == steps
        assert last < 1e-3 * first, (first, last)
        np.testing.assert_allclose(sess.run(w), w_true, atol=0.05)


# ------------------------------------------------------------------------------ schedules


def _schedule_values(build, steps):
    step = tf.Variable(np.int64(0), name="global_step", trainable=False)
    value = build(step)
    out = []
    with tf.Session() as sess:
        for s in steps:
            sess.run(step.assign(np.int64(s)))
            out.append(float(sess.run(value)))
    return value, out


def test_exponential_decay():
    steps = [0, 5, 10, 25]
    value, got = _schedule_values(
        lambda s: train.exponential_decay(0.1, s, 10, 0.5), steps)
    assert value.dtype is tf.float32
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (s / 10) for s in steps], rtol=1e-6)
    _, stair = _schedule_values(
        lambda s: train.exponential_decay(0.1, s, 10, 0.5, staircase=True), steps)
    np.testing.assert_allclose(stair, [0.1 * 0.5 ** (s // 10) for s in steps], rtol=1e-6)
    with pytest.raises(ValueError, match="global_step is required"):
        train.exponential_decay(0.1, None, 10, 0.5)


def test_inverse_time_and_natural_exp_decay():
    steps = [0, 3, 7, 20]
    _, got = _schedule_values(lambda s: train.inverse_time_decay(0.2, s, 5, 0.5), steps)
    np.testing.assert_allclose(got, [0.2 / (1 + 0.5 * s / 5) for s in steps], rtol=1e-6)
    _, got = _schedule_values(
        lambda s: train.inverse_time_decay(0.2, s, 5, 0.5, staircase=True), steps)
    np.testing.assert_allclose(got, [0.2 / (1 + 0.5 * (s // 5)) for s in steps], rtol=1e-6)
    _, got = _schedule_values(lambda s: train.natural_exp_decay(0.2, s, 5, 0.5), steps)
    np.testing.assert_allclose(got, [0.2 * math.exp(-0.5 * s / 5) for s in steps], rtol=1e-6)


def test_polynomial_decay():
    steps = [0, 2, 5, 10, 15]
    _, got = _schedule_values(
        lambda s: train.polynomial_decay(0.1, s, 10, end_learning_rate=0.01, power=2.0), steps)
    want = [(0.1 - 0.01) * (1 - min(s, 10) / 10) ** 2 + 0.01 for s in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    _, got = _schedule_values(
        lambda s: train.polynomial_decay(0.1, s, 10, end_learning_rate=0.01, cycle=True), steps)
    want = []
    for s in steps:
        span = 10 * (1 if s == 0 else math.ceil(s / 10))
        want.append((0.1 - 0.01) * (1 - s / span) + 0.01)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_cosine_decay():
    steps = [0, 5, 10, 12]
    _, got = _schedule_values(lambda s: train.cosine_decay(0.1, s, 10, alpha=0.1), steps)
    want = [0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(s, 10) / 10)) + 0.1) for s in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_piecewise_constant():
    steps = [0, 100, 101, 150, 200, 201, 1000]
    _, got = _schedule_values(
        lambda s: train.piecewise_constant(s, [100, 200], [1.0, 0.5, 0.1]), steps)
    assert got == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.5, 0.1, 0.1])
    with pytest.raises(ValueError, match="1 less than the length of values"):
        train.piecewise_constant(tf.constant(1), [1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="same dtype"):
        train.piecewise_constant(tf.constant(1), [1], [1.0, tf.constant(2, tf.int32)])


def test_schedule_feeds_an_optimizer():
    step = train.get_or_create_global_step()
    lr = train.exponential_decay(1.0, step, 1, 0.5)
    var = tf.Variable(np.zeros(1), name="w")
    op = train.GradientDescentOptimizer(lr).apply_gradients(
        [(tf.constant(np.ones(1)), var)], global_step=step)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(op)
        # lr = 1, 0.5, 0.25 at steps 0, 1, 2
        np.testing.assert_allclose(sess.run(var), [-1.75])
    assert lr.graph.get_operation_by_name("ExponentialDecay").type == "Mul"
    assert dtypes.float32 is lr.dtype

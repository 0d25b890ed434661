"""Matrix products of the dynamics run at the full precision of their dtype, whatever
JAX's default matmul precision (on GPUs a float32 product may otherwise use TF32 or
bfloat16 passes, which the saddle-point solve amplifies; docs page "Precision")."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx


def _dot_precisions(jaxpr) -> list:
    """The `precision` of every `dot_general` of a jaxpr, nested jaxprs included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.append(eqn.params["precision"])
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out.extend(_dot_precisions(inner))
    return out


def _full(precision) -> bool:
    highest = jax.lax.Precision.HIGHEST
    if isinstance(precision, tuple):
        return all(p == highest for p in precision)
    return precision == highest


@pytest.mark.parametrize("name", ["snake_cart", "tilted_rolling_disk"])
def test_products_of_the_dynamics_run_at_full_precision_under_a_bfloat16_default(name):
    model = getattr(cx.models, name)()

    def acc(q, qd):
        return cx.accelerations(model.system, 0.0, q, qd, model.params).qdd

    def rollout(q, qd):
        return cx.simulate(
            model.system, q, qd, model.params, t1=0.01, dt0=1e-3, solver=diffrax.Heun(),
            stepsize_controller=diffrax.ConstantStepSize(),
        ).q[-1]  # fmt: skip

    with jax.default_matmul_precision("bfloat16"):
        programs = [
            (acc, (model.q0, model.qd0)),
            (jax.vmap(acc), (model.q0[None], model.qd0[None])),
            (jax.grad(lambda q, qd: jnp.sum(acc(q, qd))), (model.q0, model.qd0)),
            (rollout, (model.q0, model.qd0)),
        ]
        for fn, args in programs:
            precisions = _dot_precisions(jax.make_jaxpr(fn)(*args).jaxpr)
            assert precisions, "no matrix product traced"
            assert all(_full(p) for p in precisions), precisions
        low = jax.jit(acc)(model.q0, model.qd0)
    np.testing.assert_array_equal(low, jax.jit(acc)(model.q0, model.qd0))

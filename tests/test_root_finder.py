"""`cx.Chandrupatla`: Chandrupatla's bracketing root finder (the default of
`cx.rigid.simulate_contacts`' event location), against closed-form roots and bisection."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import constrax as cx

jax.config.update("jax_enable_x64", True)

G, V, DELTA = 9.81, 3.0, 1e-8
FLIGHT = 2 * V / G
TOUCHDOWN = FLIGHT - DELTA / V  # where v t - g t^2/2 = delta on the way down, to O(delta^2)


def _bounce_event(t, _):
    """A separated contact's event function along a ball's flight after a bounce: the gap
    less delta, lifted by its rate while it opens (a kink at the apex)."""
    h, hd = V * t - 0.5 * G * t * t, V - G * t
    return h - DELTA + jnp.maximum(hd, 0.0)


def _solve(fn, finder, lower, upper, **kw):
    return optx.root_find(
        fn, finder, jnp.asarray(upper), options=dict(lower=lower, upper=upper), **kw
    )


TOL = 1e-10


@pytest.mark.parametrize("lower, upper", [(0.0, 1.3 * FLIGHT), (0.5 * FLIGHT, 1.05 * FLIGHT)])
def test_chandrupatla_locates_a_touchdown_in_a_third_of_bisections_evaluations(lower, upper):
    # The touchdown's time from the quadratic formula (delta^2 term included); the bracket
    # spans the apex's kink in the first case.
    exact = (V + np.sqrt(V**2 - 2 * G * DELTA)) / G
    assert abs(exact - TOUCHDOWN) < 1e-15
    ours = _solve(_bounce_event, cx.Chandrupatla(rtol=TOL, atol=TOL), lower, upper)
    bisect = _solve(_bounce_event, optx.Bisection(rtol=TOL, atol=TOL, flip=True), lower, upper)
    assert abs(float(ours.value) - exact) < TOL  # the bracket's width
    assert abs(float(bisect.value) - exact) < TOL
    # Both ends of the bracket included in our count.
    assert int(ours.stats["num_steps"]) <= 11
    assert int(bisect.stats["num_steps"]) >= 32


def test_chandrupatla_takes_the_secant_root_of_a_linear_function():
    sol = _solve(lambda t, _: 0.3 - 2.0 * t, cx.Chandrupatla(rtol=TOL, atol=TOL), -1.0, 4.0)
    assert abs(float(sol.value) - 0.15) < 1e-15
    assert int(sol.stats["num_steps"]) <= 4  # both ends, the secant's root, one nudge


def test_chandrupatla_converges_on_a_jump_like_bisection():
    # No interpolation can help: f jumps from +1 to -1 at the root.
    root = 0.3141592653589793
    jump = lambda t, _: jnp.where(t < root, 1.0, -1.0)  # noqa: E731
    ours = _solve(jump, cx.Chandrupatla(rtol=TOL, atol=TOL), 0.0, 1.0)
    bisect = _solve(jump, optx.Bisection(rtol=TOL, atol=TOL, flip=True), 0.0, 1.0, throw=False)
    assert abs(float(ours.value) - root) < 2 * TOL
    assert int(ours.stats["num_steps"]) <= int(bisect.stats["num_steps"]) + 4


def test_a_bracket_without_a_sign_change_is_a_failed_solve_not_a_root():
    finder = cx.Chandrupatla(rtol=TOL, atol=TOL)
    sol = _solve(lambda t, _: 1.0 + t * t, finder, 0.0, 1.0, throw=False)
    assert sol.result == optx.RESULTS.nonlinear_divergence
    with pytest.raises(Exception, match="diverged"):
        jax.block_until_ready(_solve(lambda t, _: 1.0 + t * t, finder, 0.0, 1.0).value)


def test_a_non_finite_value_is_reported():
    sol = _solve(
        lambda t, _: jnp.where(t > 0.5, jnp.nan, 1.0 - 3 * t),
        cx.Chandrupatla(rtol=TOL, atol=TOL),
        0.0,
        1.0,
        throw=False,
    )
    assert sol.result == optx.RESULTS.nonfinite


def test_chandrupatla_refuses_a_vector_function_and_a_missing_bracket():
    finder = cx.Chandrupatla(rtol=TOL, atol=TOL)
    with pytest.raises(ValueError, match="scalar"):
        optx.root_find(lambda t, _: t - 1.0, finder, jnp.zeros(2), options=dict(lower=0, upper=2))
    with pytest.raises(ValueError, match="bracket"):
        optx.root_find(lambda t, _: t - 1.0, finder, jnp.asarray(0.0))


def test_chandrupatla_roots_under_jit_vmap_and_grad():
    # The root of v t - g t^2 / 2 = 0 on (0.3, 1.0] is 2v/g, d/dv = 2/g (the implicit
    # function theorem, as optimistix differentiates any root find), also batched.
    def root(v, upper):
        fn = lambda t, v: v * t - 0.5 * G * t * t  # noqa: E731
        sol = optx.root_find(
            fn, cx.Chandrupatla(rtol=TOL, atol=TOL), upper, v, options=dict(lower=0.3, upper=upper)
        )
        return sol.value

    vs = jnp.array([2.5, 3.0, 3.5])
    roots = jax.jit(jax.vmap(root, in_axes=(0, None)))(vs, 1.0)
    np.testing.assert_allclose(roots, 2 * vs / G, rtol=0, atol=TOL)  # the bracket's width
    grads = jax.jit(jax.vmap(jax.grad(root), in_axes=(0, None)))(vs, 1.0)
    np.testing.assert_allclose(grads, 2 / G, rtol=1e-9)  # at the root found, to its tolerance
    h = 1e-6
    fd = (root(3.0 + h, 1.0) - root(3.0 - h, 1.0)) / (2 * h)
    assert abs(float(grads[1]) - float(fd)) < 1e-8


def test_chandrupatla_locates_a_diffrax_event_at_the_closed_form_time():
    # A ball dropped from 1 m: the floor at t = sqrt(2/g), the event located on the
    # step's dense output (Tsit5 is exact on the parabola).
    def cond(t, y, args, **kwargs):
        return y[0]

    term = diffrax.ODETerm(lambda t, y, args: jnp.stack([y[1], -G]))
    sol = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        0.0,
        5.0,
        0.1,
        jnp.array([1.0, 0.0]),
        event=diffrax.Event(cond, root_finder=cx.Chandrupatla(rtol=TOL, atol=TOL)),
    )
    assert abs(float(sol.ts[-1]) - np.sqrt(2 / G)) < TOL

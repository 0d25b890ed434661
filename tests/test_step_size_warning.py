"""`cx.StepSizeWarning`: a fixed step beyond the stability limit of an explicit solver is
named before the run (docs/integrators.md), and nothing else is: not a stable step, not
an adaptive controller, not an implicit solver. The results are never changed."""

import warnings

import diffrax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import constrax as cx
from constrax import _simulate, _step_size

OMEGA = 100.0  # the stiff spring's angular frequency, rad/s


def L(t, q, qd, p):
    """A pendulum (bob on the unit circle, coordinates x, y) and a unit mass on a stiff
    spring (coordinate s), side by side: the spring's mode is exactly +-i*OMEGA."""
    kinetic = 0.5 * (qd @ qd)
    return kinetic - 9.81 * q[1] - 0.5 * p["k"] * q[2] ** 2


SYSTEM = cx.System(L, [cx.Holonomic(lambda t, q, p: q[0] ** 2 + q[1] ** 2 - 1.0, name="rod")])
P = {"k": jnp.array(OMEGA**2)}
Q0 = jnp.array([np.sin(0.5), -np.cos(0.5), 0.01])
QD0 = jnp.zeros(3)


def _fixed(dt, solver=diffrax.Tsit5(), **kw):
    return cx.simulate(
        SYSTEM,
        Q0,
        QD0,
        P,
        t1=1.0,
        dt0=dt,
        solver=solver,
        stepsize_controller=diffrax.ConstantStepSize(),
        **kw,
    )


def test_a_step_beyond_the_stability_limit_warns_and_names_dt_estimate_and_limit():
    dt = 3.2 / OMEGA
    with pytest.warns(
        cx.StepSizeWarning, match=r"dt0=0\.032 is beyond the stability limit of Tsit5"
    ) as rec:
        traj = _fixed(dt)
    (w,) = [r for r in rec if r.category is cx.StepSizeWarning]
    msg = str(w.message)
    assert "|lambda| = 100 (an undamped oscillation)" in msg and "|lambda|*dt0 = 3.2" in msg
    assert "dt0 <= " in msg and "PIDController" in msg and "Kvaerno5" in msg
    assert w.filename == __file__  # points at the call of cx.simulate
    # The run itself is unchanged: it diverges, as it did before the warning existed.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cx.StepSizeWarning)
        again = _fixed(dt)
    np.testing.assert_array_equal(traj.q, again.q)
    assert np.abs(traj.q[-1, 2]) > 100 * 0.01  # a 0.01 m oscillation grown 10^4-fold


def test_a_stable_step_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = _fixed(0.5 / OMEGA)
    assert np.abs(traj.q[-1, 2]) <= 0.0101


def test_an_implicit_solver_is_not_checked():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        root = diffrax.VeryChord(rtol=1e-8, atol=1e-8, norm=optx.max_norm)
        _fixed(3.2 / OMEGA, solver=diffrax.Kvaerno5(root_finder=root), throw=False)


def test_adaptive_controllers_are_not_checked(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the step-size check ran for an adaptive controller")

    monkeypatch.setattr(_simulate, "_field_jacobian", fail)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cx.simulate(SYSTEM, Q0, QD0, P, t1=0.05)
        cx.simulate(
            SYSTEM,
            Q0,
            QD0,
            P,
            t1=0.05,
            dt0=0.032,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6),
        )


def test_stability_function_of_the_tableaux():
    """R(z) from the Butcher tableau: exp(z) to the solver's order; Tsit5 amplifies the
    imaginary axis at |z| = 3.2 by 1.40 a step (the number docs/integrators.md quotes)."""
    for solver, order in ((diffrax.Euler(), 1), (diffrax.Heun(), 2), (diffrax.Tsit5(), 5)):
        c = _step_size.stability_polynomial(solver)
        z = 1e-2
        assert abs(np.polyval(c[::-1], z) - np.exp(z)) < 10 * z ** (order + 1)
    tsit5 = _step_size.stability_polynomial(diffrax.Tsit5())
    assert _step_size.spurious_growth(tsit5, np.array([3.2j]))[0] == pytest.approx(1.40, abs=5e-3)
    assert _step_size.stability_polynomial(diffrax.Kvaerno5()) is None


def test_under_jit_nothing_is_checked_or_added():
    """Inside a trace nothing is concrete: the check is skipped and adds nothing to the
    traced program (the values are the same as the eager run's)."""
    import jax

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = jax.jit(lambda p: _fixed(0.5 / OMEGA, max_steps=256).q)(P)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.jit(lambda p: _fixed(3.2 / OMEGA).q)(P)  # would warn eagerly
    np.testing.assert_allclose(q, _fixed(0.5 / OMEGA, max_steps=256).q, rtol=1e-12)

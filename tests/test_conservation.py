r"""Conservation laws and drift control over long integrations.

* Energy $E = \dot q\cdot\partial L/\partial\dot q - L$ of a conservative, scleronomic
  system with ideal (d'Alembert) constraints is constant (Neimark & Fufaev 1972: ideal
  reactions do no work): the chaotic Cartesian double pendulum over ~$10^4$ adaptive
  Tsit5 steps at rtol = atol = $10^{-12}$ keeps $|E(t) - E(0)|/|E(0)| \le 10^{-8}$.
* The index-reduced equations keep $\ddot g = 0$ but not $g = 0$: over $10^5$ fixed
  Tsit5 steps a Cartesian pendulum drifts off $|q| = l$ by more than $10^{-8}$ without
  stabilisation, and stays within $10^{-8}$ (position and velocity residuals) with
  `cx.Baumgarte(10, 10)` (docs/concepts/stabilisation.md).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

# ----------------------------------------------------------------------------------------
# Energy of the double pendulum.


def pendulum2_L(t, q, qd, p):
    x1, y1, x2, y2 = q
    T = 0.5 * p["m1"] * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * p["m2"] * (qd[2] ** 2 + qd[3] ** 2)
    return T - p["g"] * (p["m1"] * y1 + p["m2"] * y2)


def rods(t, q, p):
    x1, y1, x2, y2 = q
    return jnp.stack([x1**2 + y1**2 - p["l1"] ** 2, (x2 - x1) ** 2 + (y2 - y1) ** 2 - p["l2"] ** 2])


DOUBLE = cx.System(pendulum2_L, [cx.Holonomic(rods)])


def test_energy_is_conserved_by_the_double_pendulum_over_ten_thousand_steps():
    p = {k: jnp.asarray(v) for k, v in dict(m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=9.81).items()}
    a1, a2 = 2.0, 2.5  # high-energy, chaotic regime
    q0 = jnp.array([np.sin(a1), -np.cos(a1), np.sin(a1) + np.sin(a2), -np.cos(a1) - np.cos(a2)])
    qd0 = jnp.zeros(4)

    @eqx.filter_jit
    def run(q0, qd0, p):
        traj = cx.simulate(
            DOUBLE,
            q0,
            qd0,
            p,
            t1=20.0,
            saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 20.0, 201)),
            stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
            max_steps=50_000,
        )
        return traj.energy(), traj.stats["num_steps"], traj.q

    E, steps, q = jax.tree_util.tree_map(np.asarray, run(q0, qd0, p))
    assert steps >= 5_000  # measured: ~9900 steps
    # The motion is far from trivial: bob 2 visits both sides of the pivot.
    assert q[:, 2].min() < -0.5 and q[:, 2].max() > 0.5
    drift = np.max(np.abs(E - E[0])) / abs(E[0])
    assert drift <= 1e-8, f"relative energy drift {drift:.3g}"  # measured: ~4e-10


# ----------------------------------------------------------------------------------------
# Drift of the holonomic residual over 1e5 steps.


def pendulum_L(t, q, qd, p):
    return 0.5 * qd @ qd - p["g"] * q[1]


def rod(t, q, p):
    return q @ q - p["l"] ** 2


PENDULUM = cx.System(pendulum_L, [cx.Holonomic(rod)])
P1 = {"g": jnp.asarray(9.81), "l": jnp.asarray(1.0)}
DT = 5e-3
N_STEPS = 100_000


def test_baumgarte_with_zero_rates_is_no_stabilisation():
    q, qd = jnp.array([0.6, -0.8]), jnp.array([0.8, 0.6])
    q, qd = q * 1.001, qd + 0.01  # off the manifold, so the stabilisation terms matter

    @jax.jit
    def qdd(q, qd):
        stabs = [None, cx.Baumgarte(0.0, 0.0), cx.Baumgarte(10.0, 10.0)]
        return [cx.accelerations(PENDULUM, 0.0, q, qd, P1, stabilisation=s).qdd for s in stabs]

    a_none, a_zero, a_ten = qdd(q, qd)
    # Equal to rounding: adding the zero terms can change how XLA contracts the
    # right-hand side into fused multiply-adds (a 1-ulp difference on some CPUs), so
    # the check is a few ulps, and the stabilised accelerations are far outside it.
    ulps = 4 * np.finfo(np.float64).eps
    np.testing.assert_allclose(a_none, a_zero, rtol=ulps, atol=0)
    assert np.max(np.abs(a_none - a_ten) / np.abs(a_none)) > 1e6 * ulps


@pytest.mark.slow
def test_holonomic_residual_bounded_with_baumgarte_and_drifts_without():
    a = 2.5
    q0 = jnp.array([np.sin(a), -np.cos(a)])
    qd0 = jnp.zeros(2)
    t1 = DT * N_STEPS  # 500 s, ~200 periods
    ts = jnp.linspace(0.0, t1, 1001)

    # One compilation for both runs: vmap over the Baumgarte rates, (0, 0) being no
    # stabilisation at all (test above).
    @jax.jit
    @jax.vmap
    def run(rate):
        traj = cx.simulate(
            PENDULUM,
            q0,
            qd0,
            P1,
            t1=t1,
            dt0=DT,
            solver=diffrax.Tsit5(),
            stepsize_controller=diffrax.ConstantStepSize(),
            saveat=diffrax.SaveAt(ts=ts),
            max_steps=N_STEPS + 10,
            constraint_solver=cx.KKT(),
            stabilisation=cx.Baumgarte(rate, rate),
        )
        res = traj.constraint_residual()
        return traj.stats["num_steps"], res.position, res.velocity

    steps, g, c = jax.tree_util.tree_map(np.asarray, run(jnp.array([0.0, 10.0])))
    np.testing.assert_array_equal(steps, N_STEPS)
    g_free, g_stab = np.max(np.abs(g), axis=(1, 2))
    c_free, c_stab = np.max(np.abs(c), axis=(1, 2))
    # Measured: without 1.7e-6 (position), with Baumgarte(10, 10) 3.7e-11 / 2.5e-10.
    assert g_free > 1e-8, f"unstabilised residual {g_free:.3g} did not drift"
    assert g_stab <= 1e-8, f"stabilised position residual {g_stab:.3g}"
    assert c_stab <= 1e-8, f"stabilised velocity residual {c_stab:.3g}"

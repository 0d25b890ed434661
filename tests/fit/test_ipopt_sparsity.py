r"""IPOPT on the structural nonzeros of the derivative blocks (`cx.fit.IPOPT(sparsity=...)`,
`constrax/fit/_sparsity.py`).

References nobody here derived: dense `jax.jacfwd` / `jax.hessian` of the whole program at
fresh random points (every entry nonzero there must be in the sampled structure), the same
solve on the dense blocks, and the closed form $12 d^2/T^3$ of the double integrator's
least effort.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

pytest.importorskip("cyipopt")

from fit_problems import double_integrator  # noqa: E402

from constrax.fit import _ipopt  # noqa: E402
from constrax.fit._optimal_control import _guess, _perturbed  # noqa: E402
from constrax.fit._sparsity import StructureViolation, check_dropped  # noqa: E402

fit = cx.fit
SAMPLED = fit.IPOPT(sparsity="sampled")


def _knife_force(t, q, qd, p):
    u, th = p["u"], q[2]
    return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])


KNIFE = cx.models.knife_edge()


def parking():
    system = cx.System(KNIFE.system.lagrangian, KNIFE.system.constraints, force=_knife_force)
    return fit.OptimalControlProblem(
        system,
        {**KNIFE.params, "u": jnp.zeros(2)},
        control=lambda p: p["u"],
        t1=5.0,
        q0=jnp.zeros(3),
        qd0=jnp.zeros(3),
        q1=jnp.array([0.0, 1.0, 0.0]),
        qd1=jnp.zeros(3),
        running_cost=lambda t, q, qd, u, p: u @ u,
    )


def _structure(nlp):
    ev = _ipopt._Evaluator(nlp, np.float64)
    lo, hi = nlp.variable_bounds()
    return _ipopt._sampled(ev, nlp.layout, lo, hi, hessian=True)


@pytest.mark.parametrize(
    "transcription",
    [fit.HermiteSimpson(3), fit.Trapezoidal(3), fit.DirectMultipleShooting(3, 2)],
    ids=["hermite-simpson", "trapezoidal", "multiple-shooting"],
)
def test_sampled_structure_holds_every_nonzero_of_the_whole_programs_derivatives(transcription):
    """At fresh random points (other seeds than the sampling's), every nonzero entry of the
    dense Jacobian and of the lower triangle of the dense Hessian of the Lagrangian of the
    whole program (`jax.jacfwd` / `jax.hessian` of the objective and constraints) is an
    entry of the sampled structure, and the structure is much smaller than the blocks."""
    nlp = transcription.nlp(parking())
    L = nlp.layout
    S = _structure(nlp)
    jac = set(zip(S.jac_rows.tolist(), S.jac_cols.tolist(), strict=True))
    hess = set(zip(S.hess_rows.tolist(), S.hess_cols.tolist(), strict=True))
    assert len(jac) == S.jac_kept.size and len(hess) == S.hess_kept.size  # no duplicates
    assert S.jac_kept.size < 0.5 * L.jac_rows.size and S.hess_kept.size < 0.5 * L.hess_rows.size
    jacobian = jax.jit(jax.jacfwd(nlp.constraints))
    lagrangian = lambda z, lam, s: s * nlp.objective(z) + lam @ nlp.constraints(z)
    hessian = jax.jit(jax.hessian(lagrangian))
    rng = np.random.default_rng(12345)
    for _ in range(2):
        z = rng.standard_normal(L.nz)
        lam = rng.standard_normal(L.nc)
        J = np.asarray(jacobian(z))
        H = np.tril(np.asarray(hessian(z, lam, rng.uniform(0.5, 1.5))))
        assert set(zip(*map(np.ndarray.tolist, np.nonzero(J)), strict=True)) <= jac
        assert set(zip(*map(np.ndarray.tolist, np.nonzero(H)), strict=True)) <= hess


@pytest.mark.parametrize(
    "transcription",
    [fit.HermiteSimpson(8), fit.DirectMultipleShooting(6, 2)],
    ids=["hermite-simpson", "multiple-shooting"],
)
def test_sampled_structure_solves_to_the_dense_blocks_solution(transcription):
    """Parking the knife edge on the structural nonzeros and on the dense blocks: the same
    status and iterations, the objective, the solution and the multipliers equal to the
    solver's round-off (IPOPT's tolerance is 1e-9; MUMPS factorises the two patterns in
    different orders)."""
    problem = parking()
    nlp = transcription.nlp(problem)
    z0, _ = _guess(nlp, transcription, None)
    z0 = _perturbed(nlp, z0, 1e-2, 0)  # solve_optimal_control's default start
    out = {s: fit.IPOPT(sparsity=s).minimise(nlp, z0) for s in ("sampled", "blocks")}
    a, b = out["sampled"], out["blocks"]
    assert a.solved and b.solved and a.iterations == b.iterations
    assert abs(a.objective - b.objective) <= 1e-12 * abs(b.objective)
    np.testing.assert_allclose(a.z, b.z, rtol=0, atol=1e-9 * np.abs(b.z).max())
    np.testing.assert_allclose(
        a.multipliers, b.multipliers, rtol=0, atol=1e-8 * np.abs(b.multipliers).max()
    )


def test_an_entry_zero_at_the_sampled_points_but_not_in_the_solve_falls_back_to_the_blocks():
    """A path constraint whose derivative in the velocity is nonzero only beyond q = 5
    (`jnp.where`): zero at the sampled points (standard normal states), nonzero at the
    guess of a move to d = 10. The check at the first Jacobian evaluation fires, a warning
    names the entry, and the solve starts again on the dense blocks: the closed-form
    optimum 12 d²/T³ of the (inactive) constraint's problem, as without the where."""
    d, T = 10.0, 1.0
    problem = double_integrator(
        d,
        T,
        running_cost=lambda t, q, qd, u, p: u @ u,
        path_constraint=lambda t, q, qd, u, p: jnp.where(q[0] > 5.0, qd[0] - 100.0, -1.0),
    )
    with pytest.warns(UserWarning) as record:
        sol = fit.solve_optimal_control(
            problem, transcription=fit.HermiteSimpson(6), jitter=0.0, solver=SAMPLED
        )
    (w,) = [r for r in record if "structural nonzeros" in str(r.message)]
    assert (
        "the Jacobian entry (path_constraint[0] at " in str(w.message)
        and ", qd[0] at " in str(w.message)
        and "was zero at the 6 random points" in str(w.message)
        and "solving again from the start with the dense blocks" in str(w.message)
    )
    assert sol.success
    assert abs(sol.objective - 12 * d**2 / T**3) <= 1e-9 * 12 * d**2 / T**3
    assert (
        sol.objective
        == fit.solve_optimal_control(
            problem, transcription=fit.HermiteSimpson(6), jitter=0.0
        ).objective
    )  # the dense blocks (the default) reach the same point
    # The dense blocks from then on (remembered for the problem): no second warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = fit.solve_optimal_control(
            problem, transcription=fit.HermiteSimpson(6), jitter=0.0, solver=SAMPLED
        )
    assert again.iterations == sol.iterations and again.objective == sol.objective


def test_a_hessian_entry_zero_at_the_sampled_points_but_not_in_the_solve_falls_back():
    """The same for the Hessian of the Lagrangian: a running cost whose curvature in the
    velocity is nonzero only beyond q = 5. The warning names the Hessian entry, and the
    result is the solve on the dense blocks."""
    problem = double_integrator(
        running_cost=lambda t, q, qd, u, p: u @ u + jnp.where(q[0] > 5.0, qd[0] ** 2, 0.0)
    )
    tr = fit.HermiteSimpson(6)
    with pytest.warns(UserWarning, match=r"the Hessian entry \(qd\[0\] at .*, qd\[0\] at .*\)"):
        sol = fit.solve_optimal_control(problem, transcription=tr, jitter=0.0, solver=SAMPLED)
    dense = fit.solve_optimal_control(
        problem, transcription=tr, jitter=0.0, solver=fit.IPOPT(sparsity="blocks")
    )
    assert sol.success and dense.success
    assert sol.iterations == dense.iterations and sol.objective == dense.objective


def test_the_check_of_dropped_entries_names_the_first_nonzero_and_fires_on_nan():
    """Zero to round-off passes; the first entry above it is named; NaN fires."""
    rows, cols = np.arange(5) + 10, np.arange(5) + 20
    dropped = np.array([1, 3, 4])
    check_dropped("Jacobian", np.array([1.0, 0.0, 2.0, -0.0, 0.0]), dropped, rows, cols, 1)
    # Round-off of a mathematically vanishing entry (1e-21 of the largest): no violation.
    check_dropped("Jacobian", np.array([1.0, 0.0, 2.0, -1e-21, 0.0]), dropped, rows, cols, 1)
    with pytest.raises(
        StructureViolation, match=r"Jacobian entry \(13, 23\) = 0.5 at evaluation 7"
    ):
        check_dropped("Jacobian", np.array([1.0, 0.0, 2.0, 0.5, 3.0]), dropped, rows, cols, 7)
    with pytest.raises(StructureViolation, match=r"Hessian entry \(14, 24\) = nan"):
        check_dropped("Hessian", np.array([1.0, 0.0, 2.0, 0.0, np.nan]), dropped, rows, cols, 2)


def test_bad_sparsity_option_raises_naming_it():
    assert fit.IPOPT().sparsity == "blocks"  # the default (module docstring of _ipopt)
    with pytest.raises(ValueError, match="`sparsity` must be 'sampled' or 'blocks', got 'auto'"):
        fit.IPOPT(sparsity="auto")

r"""Parameter identification (constrax.fit): recovery, uncertainty coverage, multiple
shooting, checkpoint/resume, and bad input.

System: the snake cart (Briggs 2016, §1.2, `cx.models.snake_cart`) driven by its known
steering torque. Identifiability: the steering row reads $2J_w\ddot\phi = \tau(t)$, so
$J_w$ is identifiable in absolute terms; the $(x, y, \theta)$ motion has no applied force
and depends on the inertias only through the ratio
$(J_b + 2J_w + \tfrac12\ell^2 m_w)/(m_b + 2m_w)$, and on the wheel base $\ell$ through
the constraints. We fit $(J_b, J_w, \ell)$ with the masses known; $(m_b, J_b)$ together
are *not* identifiable (checked below: the Fisher matrix is singular).
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
import pytest
import scipy.stats

import constrax as cx
import constrax.fit as fit
from constrax import models

MODEL = models.snake_cart(tau_amp=0.1)
TRUE = MODEL.params
Q0 = jnp.array([0.0, 0.0, 0.0, 0.0])
# phi stays in [-0.25, 0.55], away from the singular configurations phi = ±pi/2;
# with phi0 = 0 the initial state satisfies the constraints for every wheel base l.
QD0 = jnp.array([0.5, 0.0, 0.0, -0.3])
TS = jnp.linspace(0.1, 3.0, 30)
FREE = lambda p: (p["J_b"], p["J_w"], p["l"])
NAMES = ("J_b", "J_w", "l")
SIGMA = 1e-3
GUESS = {**TRUE, "J_b": TRUE["J_b"] * 1.3, "J_w": TRUE["J_w"] * 0.7, "l": TRUE["l"] * 1.1}
OPTIMISER = optax.adam(1e-2)  # one object: the jitted optax step compiles once


@pytest.fixture(scope="module")
def clean():
    """Reference data: an independent tighter-tolerance solve (rtol = atol = 1e-12)."""
    traj = cx.simulate(
        MODEL.system,
        Q0,
        QD0,
        TRUE,
        t1=TS[-1],
        saveat=diffrax.SaveAt(ts=TS),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
        constraint_solver=cx.KKT(),
    )
    return np.asarray(traj.q)


def problem(values, shooting=fit.SingleShooting(), free=FREE, sigma=SIGMA, **kw):
    obs = fit.Observations(TS, values, sigma=sigma, **kw)
    return fit.IdentificationProblem(
        MODEL.system,
        obs,
        Q0,
        QD0,
        TRUE,
        free=free,
        transforms=fit.Positive(),
        shooting=shooting,
        adjoint=diffrax.ForwardMode(),
        constraint_solver=cx.KKT(),
    )


def rel_error(params):
    return np.array([abs(float(params[k] / TRUE[k]) - 1.0) for k in NAMES])


def test_noiseless_data_recovers_true_parameters(clean):
    res = fit.solve(problem(clean), GUESS)
    assert res.result == optx.RESULTS.successful
    assert np.all(rel_error(res.params) <= 1e-6), rel_error(res.params)
    # the parameters that were not fitted are untouched
    for k in ("m_b", "m_w", "tau_amp", "tau_freq"):
        assert res.params[k] == TRUE[k]


def test_missing_observations_are_masked(clean):
    values = clean.copy()
    values[::3, 1] = np.nan  # every third y missing
    values[7, :] = np.nan
    obs = fit.Observations(TS, values, sigma=SIGMA)
    assert obs.num_observed == values.size - 10 - 4
    res = fit.solve(problem(values), GUESS)
    assert np.all(rel_error(res.params) <= 1e-6), rel_error(res.params)


def test_noisy_estimates_within_reported_uncertainty(clean):
    """Coverage over independent noise seeds: the Mahalanobis distances of the estimates
    from the truth, under the reported Gauss–Newton covariance, sum to a chi^2 variable
    with 3 x seeds degrees of freedom; each marginal error is within 4 reported sigma."""
    seeds = range(8)
    d2, z = [], []
    truth = np.array([float(TRUE[k]) for k in NAMES])
    for seed in seeds:
        noise = SIGMA * np.asarray(jax.random.normal(jax.random.PRNGKey(seed), clean.shape))
        prob = problem(clean + noise)
        res = fit.solve(prob, GUESS)
        unc = fit.uncertainty(prob, res.params)
        est = np.array([float(res.params[k]) for k in NAMES])
        err = est - truth
        d2.append(err @ np.linalg.solve(np.asarray(unc.covariance), err))
        z.append(err / np.array([float(s) for s in unc.std]))
        assert unc.dof == clean.size - 3
    z = np.concatenate(z)
    total = float(np.sum(d2))
    k = 3 * len(seeds)
    lo, hi = scipy.stats.chi2.ppf([0.0005, 0.9995], k)
    assert lo <= total <= hi, (total, lo, hi)
    assert np.max(np.abs(z)) < 4.0, z


@pytest.mark.slow
def test_mass_and_inertia_scale_not_identifiable(clean):
    """Without a known force on (x, y, theta), m_b and J_b enter only through one ratio:
    the Fisher information J^T J for (m_b, J_b) is singular."""
    prob = problem(clean, free=lambda p: (p["m_b"], p["J_b"]))
    s = np.linalg.svd(np.asarray(fit.uncertainty(prob, TRUE).information), compute_uv=False)
    assert s[-1] / s[0] < 1e-10, s
    # while (J_b, J_w, l) are identifiable: a well-conditioned information matrix
    s = np.linalg.svd(
        np.asarray(fit.uncertainty(problem(clean), TRUE).information), compute_uv=False
    )
    assert s[-1] / s[0] > 1e-8, s


@pytest.mark.slow
def test_multiple_shooting_recovers_true_parameters(clean):
    prob = problem(clean, shooting=fit.MultipleShooting(3))
    res = fit.solve(prob, GUESS)
    assert np.all(rel_error(res.params) <= 1e-6), rel_error(res.params)
    assert float(res.loss) < 1e-12


class _Interrupt(Exception):
    pass


def test_resume_after_interruption_gives_identical_parameters(clean, tmp_path):
    prob = problem(clean)
    ref = fit.solve(prob, GUESS, OPTIMISER, steps=6, progress=True)
    assert ref.losses[-1] < ref.losses[0]

    path = tmp_path / "fit.ckpt"

    def interrupt(step, loss, params):
        if step == 3:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        fit.solve(
            prob, GUESS, OPTIMISER, steps=6, checkpoint=path, checkpoint_every=2, callback=interrupt
        )
    assert path.exists()
    res = fit.solve(prob, GUESS, OPTIMISER, steps=6, checkpoint=path, checkpoint_every=2)
    assert res.num_steps == 6
    np.testing.assert_array_equal(res.losses, ref.losses)
    for a, b in zip(jax.tree.leaves(res.params), jax.tree.leaves(ref.params), strict=True):
        np.testing.assert_array_equal(a, b)

    # a checkpoint written for another problem is refused, never loaded
    other = problem(clean + 1e-3)
    with pytest.raises(
        ValueError, match="written for a different problem: the problem configuration"
    ):
        fit.solve(other, GUESS, OPTIMISER, steps=6, checkpoint=path)
    with pytest.raises(ValueError, match="different problem: the tree structure"):
        fit.solve(prob, GUESS, optax.sgd(1e-3), steps=6, checkpoint=path)

    # early stopping at a target loss
    res = fit.solve(
        prob, GUESS, OPTIMISER, steps=6, early_stopping=fit.EarlyStopping(target=np.inf)
    )
    assert res.stopped_early and res.num_steps == 1


def test_not_a_checkpoint_is_refused(clean, tmp_path):
    path = tmp_path / "junk.ckpt"
    path.write_bytes(b"hello")
    with pytest.raises(ValueError, match="is not a constrax checkpoint"):
        fit.solve(problem(clean), GUESS, OPTIMISER, steps=2, checkpoint=path)


# -- bad input --------------------------------------------------------------------------


def test_nan_observations_refused_on_request(clean):
    values = clean.copy()
    values[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"1 NaN entries \(first at row 4, column 2\)"):
        fit.Observations(TS, values, nan_policy="raise")
    values[4, 2] = np.inf
    with pytest.raises(ValueError, match="contains inf"):
        fit.Observations(TS, values)
    with pytest.raises(ValueError, match="all NaN"):
        fit.Observations(TS, np.full_like(clean, np.nan))


def test_time_grid_not_increasing(clean):
    ts = np.asarray(TS).copy()
    ts[5] = ts[4]
    with pytest.raises(ValueError, match=r"`ts` must be strictly increasing, got ts\[4\]"):
        fit.Observations(ts, clean)
    with pytest.raises(ValueError, match="finite"):
        fit.Observations(np.where(np.arange(30) == 3, np.nan, TS), clean)
    with pytest.raises(ValueError, match="before t0"):
        fit.IdentificationProblem(MODEL.system, fit.Observations(TS, clean), Q0, QD0, TRUE, t0=0.5)


def test_observation_shapes(clean):
    with pytest.raises(
        ValueError, match=r"`values` must have shape \(k, d\) with k = len\(ts\) = 30"
    ):
        fit.Observations(TS, clean[:-1])
    with pytest.raises(ValueError, match="`coordinates` names 2 observed coordinates"):
        fit.Observations(TS, clean, coordinates=(0, 1))
    with pytest.raises(ValueError, match=r"`coordinates` \[7\] out of range"):
        problem(clean[:, :2], coordinates=(0, 7))
    with pytest.raises(ValueError, match="all n = 4 coordinates are observed"):
        problem(clean[:, :2])
    with pytest.raises(ValueError, match="`sigma` must be positive"):
        fit.Observations(TS, clean, sigma=-1.0)
    with pytest.raises(ValueError, match=r"`sigma` must be a scalar or shape \(d,\) = \(4,\)"):
        fit.Observations(TS, clean, sigma=np.ones(3))


def test_parameter_structure_differs_from_model(clean):
    prob = problem(clean)
    bad = {k: v for k, v in GUESS.items() if k != "l"}
    with pytest.raises(ValueError, match="`init` must have the same tree structure"):
        fit.solve(prob, bad)
    with pytest.raises(ValueError, match=r"`init\['J_b'\]` has shape \(2,\), expected \(\)"):
        fit.solve(prob, {**GUESS, "J_b": jnp.ones(2)})
    with pytest.raises(ValueError, match="`transforms` must be a pytree prefix"):
        fit.IdentificationProblem(
            MODEL.system,
            prob.observations,
            Q0,
            QD0,
            TRUE,
            free=FREE,
            transforms=(fit.Positive(), fit.Positive()),
        )
    with pytest.raises(Exception, match="a parameter is <= 0"):
        fit.solve(prob, {**GUESS, "J_b": jnp.asarray(-1.0)})
    with pytest.raises(TypeError, match="`optimiser` must be an optimistix least-squares"):
        fit.solve(prob, GUESS, optimiser="adam")


def test_shooting_configuration_errors(clean):
    with pytest.raises(ValueError, match="`num_segments` must be an int >= 2"):
        fit.MultipleShooting(1)
    with pytest.raises(ValueError, match=r"needs at least 2 observation times per segment"):
        problem(clean, shooting=fit.MultipleShooting(16))


def test_transforms_round_trip():
    x = {"a": jnp.array([0.3, 2.0]), "b": jnp.array(0.25)}
    tr = {"a": fit.Positive(), "b": fit.Bounded(0.0, 1.0)}
    u = fit.unconstrain(tr, x)
    np.testing.assert_allclose(u["a"], np.log([0.3, 2.0]), rtol=1e-15)
    back = fit.constrain(tr, u)
    for k in x:
        np.testing.assert_allclose(back[k], x[k], rtol=1e-14)
    with pytest.raises(ValueError, match="expected lower < upper"):
        fit.Bounded(1.0, 0.0)
    with pytest.raises(Exception, match=r"outside \(lower, upper\)"):
        fit.unconstrain(fit.Bounded(0.0, 1.0), jnp.array(2.0))


@pytest.mark.slow
def test_identification_through_singular_crossings_recovers_parameters_with_projection():
    """Data whose steering angle crosses phi = pi/2 + k pi three times (tau = 0.3 sin t from
    phi0 = 1.2, over 4 s): with `stabilisation=cx.Projection()` the fit recovers the wheel
    and body inertias J_w, J_b from a 30 % wrong guess."""
    model = models.snake_cart(tau_amp=0.3)
    true = model.params
    q0 = jnp.array([0.2, -0.1, 0.3, 1.2])
    s, phi = 0.6, 1.2
    xb, thd = s * true["l"] * np.cos(phi), 2 * s * np.sin(phi)
    qd0 = jnp.array([xb * np.cos(0.3), xb * np.sin(0.3), thd, 0.5])
    ts = jnp.linspace(0.1, 4.0, 40)
    kw = dict(stabilisation=cx.Projection(), constraint_solver=cx.AutoSolver())
    data = cx.simulate(
        model.system,
        q0,
        qd0,
        true,
        t1=ts[-1],
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
        **kw,
    ).q
    phis = np.asarray(data[:, 3])
    crossings = np.sum(np.diff(np.floor((phis - np.pi / 2) / np.pi)) != 0)
    assert crossings >= 3, phis
    prob = fit.IdentificationProblem(
        model.system,
        fit.Observations(ts, np.asarray(data), sigma=SIGMA),
        q0,
        qd0,
        true,
        free=lambda p: (p["J_w"], p["J_b"]),
        transforms=fit.Positive(),
        adjoint=diffrax.ForwardMode(),
        **kw,
    )
    guess = {**true, "J_w": true["J_w"] * 0.7, "J_b": true["J_b"] * 1.3}
    res = fit.solve(prob, guess)
    for k in ("J_w", "J_b"):
        assert abs(float(res.params[k] / true[k]) - 1.0) <= 1e-6, (k, res.params[k], true[k])


def test_nan_start_and_unconverged_least_squares_raise_naming_the_cause(clean):
    """A NaN in the starting parameters is named before anything compiles; a
    Levenberg–Marquardt run that hits `steps` says so (not an opaque runtime error), and
    with throw=False returns its result instead."""
    prob = problem(clean)
    with pytest.raises(ValueError, match=r"`init` holds non-finite values at \['J_w'\]"):
        fit.solve(prob, {**GUESS, "J_w": jnp.nan})
    with pytest.raises(RuntimeError, match=r"stopped after 1 of `steps`=1 steps.*throw=False"):
        fit.solve(prob, GUESS, steps=1)
    res = fit.solve(prob, GUESS, steps=1, throw=False)
    assert res.num_steps == 1 and res.result != optx.RESULTS.successful

r"""Parameter identification by gradient through whole constrained trajectories.

The Chaplygin sleigh (`models.chaplygin_sleigh`, Bloch §1.7): a knife edge with the
centre of mass a distance $a$ ahead of it, inertia $I$. From noisy observations of the
pose $(x, y, \theta)$ (noise $\sigma$) along one trajectory from a known initial state, fit
$(a, I)$ by Levenberg–Marquardt (`optimistix`) on the residuals
$r = (q(t_k; a, I) - y_k)/\sigma$; the Jacobian $\partial q(t_k)/\partial(a, I)$ comes from
forward-mode differentiation through `cx.simulate`. The Gauss–Newton covariance
$(J^\top J)^{-1}$ gives the standard errors, and the estimate must fall within a few of
them of the truth.
"""

import json

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .. import models
from ._common import enable_x64, outpath, pyplot, simulate_model, stopwatch

TRUE = {"a": 0.5, "I": 0.1}
GUESS = {"a": 0.2, "I": 0.3}


def _positions(model, theta, ts):
    p = {**model.params, "a": theta[0], "I": theta[1]}
    return simulate_model(model, ts, p, adjoint=diffrax.ForwardMode()).q


@eqx.filter_jit
def _fit(model, ts, ys, sigma, theta0, max_steps):
    def residuals(log_theta, _):
        return ((_positions(model, jnp.exp(log_theta), ts) - ys) / sigma).ravel()

    sol = optx.least_squares(
        residuals,
        optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10),
        jnp.log(theta0),
        max_steps=max_steps,
        throw=False,
    )
    theta = jnp.exp(sol.value)
    J = jax.jacfwd(lambda th: ((_positions(model, th, ts) - ys) / sigma).ravel())(theta)
    cov = jnp.linalg.inv(J.T @ J)
    r = residuals(sol.value, None)
    return theta, cov, r, sol.stats["num_steps"], sol.result == optx.RESULTS.successful


def run(outdir, quick: bool = False) -> dict:
    """Identify $(a, I)$ of the Chaplygin sleigh; write `parameter_identification.png`.

    **Returns:** a dict with the true, initial and fitted parameters, their standard
    errors and z-scores, the RMS of the normalised residuals, the solver steps and time.
    """
    enable_x64()
    model = models.chaplygin_sleigh()
    T = 4.0 if quick else 8.0
    ts = jnp.linspace(0.0, T, 21 if quick else 41)
    sigma = 1e-3
    truth = jnp.array([TRUE["a"], TRUE["I"]])
    clean = _positions(model, truth, ts)
    noise = sigma * jax.random.normal(jax.random.PRNGKey(42), clean.shape)
    ys = clean + noise
    guess = jnp.array([GUESS["a"], GUESS["I"]])
    with stopwatch() as sw:
        theta, cov, r, steps, ok = jax.block_until_ready(_fit(model, ts, ys, sigma, guess, 100))
    se = np.sqrt(np.diag(np.asarray(cov)))
    z = (np.asarray(theta) - np.asarray(truth)) / se
    fitted = _positions(model, theta, ts)
    start = _positions(model, guess, ts)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    ax.plot(np.asarray(ys[:, 0]), np.asarray(ys[:, 1]), "k.", ms=4, label="observations")
    ax.plot(np.asarray(start[:, 0]), np.asarray(start[:, 1]), "--", label="initial guess")
    ax.plot(np.asarray(fitted[:, 0]), np.asarray(fitted[:, 1]), label="fitted")
    ax.set(xlabel="x [m]", ylabel="y [m]", title="Chaplygin sleigh: identify (a, I)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(outpath(outdir, "parameter_identification.png"), dpi=110)
    plt.close(fig)

    summary = {
        "model": "chaplygin_sleigh",
        "true": TRUE,
        "initial_guess": GUESS,
        "fitted": {"a": float(theta[0]), "I": float(theta[1])},
        "std_error": {"a": float(se[0]), "I": float(se[1])},
        "z_score_max": float(np.abs(z).max()),
        "relative_error_max": float(np.max(np.abs(np.asarray(theta) / np.asarray(truth) - 1))),
        "noise_sigma": sigma,
        "observations": int(ys.size),
        "rms_normalised_residual": float(np.sqrt(np.mean(np.asarray(r) ** 2))),
        "solver_steps": int(steps),
        "converged": bool(ok),
        "wall_s": float(sw()),
        "figure": "parameter_identification.png",
    }
    with open(outpath(outdir, "parameter_identification.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary

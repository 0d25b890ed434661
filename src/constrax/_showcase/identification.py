r"""Parameter identification by gradient through whole constrained trajectories.

The Chaplygin sleigh (`models.chaplygin_sleigh`; Bloch, *Nonholonomic Mechanics and
Control*, 2003, §1.7): a knife edge with the
centre of mass a distance $a$ ahead of it, inertia $I$. From noisy observations of the
pose $(x, y, \theta)$ (noise $\sigma$) along one trajectory from a known initial state, fit
$(a, I)$ by Levenberg–Marquardt (`optimistix`) on the residuals
$r = (q(t_k; a, I) - y_k)/\sigma$; the Jacobian $\partial q(t_k)/\partial(a, I)$ comes from
forward-mode differentiation through `cx.simulate`. The Gauss–Newton covariance
$(J^\top J)^{-1}$ gives the standard errors, and the estimate must fall within a few of
them of the truth. The figure shows the data and fit, the residuals in units of the
noise, and the fitted values with their standard errors against the truth.
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
    fig, (ax1, ax2, ax3) = plt.subplots(
        1, 3, figsize=(14, 4.3), gridspec_kw={"width_ratios": [1.1, 1.2, 1.0]}
    )
    ax1.plot(np.asarray(ys[:, 0]), np.asarray(ys[:, 1]), "k.", ms=4, label="observations")
    ax1.plot(np.asarray(start[:, 0]), np.asarray(start[:, 1]), "--", label="initial guess")
    ax1.plot(np.asarray(fitted[:, 0]), np.asarray(fitted[:, 1]), label="fitted")
    ax1.set(xlabel="x [m]", ylabel="y [m]", title="Chaplygin sleigh: identify (a, I)")
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.legend(fontsize=8)
    # Residuals at the fit in units of the noise: structure-free and about 1 if the model
    # explains the data down to the noise.
    rn = np.asarray(r).reshape(ys.shape)
    for j, name in enumerate(("x", "y", r"\theta")):
        ax2.plot(np.asarray(ts), rn[:, j], "o-", ms=3, lw=0.7, label=rf"${name}$")
    ax2.axhspan(-2, 2, color="0.92", label=r"$\pm 2$")
    ax2.axhline(0.0, color="k", lw=0.6)
    ax2.set(
        xlabel="t [s]",
        ylabel=r"(model $-$ data) / $\sigma$",
        title=rf"residuals at the fit ($\sigma$ = {sigma:g} m, rad); RMS "
        f"{np.sqrt(np.mean(rn**2)):.2f}",
    )
    ax2.legend(fontsize=8, ncol=4)
    # Fitted values with their Gauss-Newton standard errors, relative to the truth.
    names, units = ("a", "I"), ("m", "kg m²")
    rel = 100 * (np.asarray(theta) / np.asarray(truth) - 1)
    rel_se = 100 * se / np.asarray(truth)
    xs = np.arange(2)
    ax3.errorbar(xs, rel, yerr=2 * rel_se, fmt="none", ecolor="C0", elinewidth=1, capsize=6)
    ax3.errorbar(xs, rel, yerr=rel_se, fmt="o", color="C0", elinewidth=3, capsize=0,
                 label=r"fit $\pm 1\sigma$ (thick), $\pm 2\sigma$ (thin)")  # fmt: skip
    ax3.axhline(0.0, color="k", lw=0.8, ls="--", label="truth")
    for i, (n, u) in enumerate(zip(names, units, strict=True)):
        ax3.annotate(
            f"{n} = {float(theta[i]):.5f}\n± {se[i]:.5f} {u}\n(true {TRUE[n]:g})",
            (xs[i], rel[i] + 2 * rel_se[i]), xytext=(0, 6), textcoords="offset points",
            ha="center", va="bottom", fontsize=8,
        )  # fmt: skip
    lim = 1.6 * np.max(np.abs(rel) + 2 * rel_se)
    ax3.set_ylim(-lim, 1.8 * lim)
    ax3.set_xlim(-0.6, 1.6)
    ax3.set_xticks(xs, [f"{n} [{u}]" for n, u in zip(names, units, strict=True)])
    ax3.set(ylabel="fitted / true − 1 [%]", title="fitted values (Gauss–Newton std. errors)")
    ax3.legend(fontsize=7, loc="lower center")
    fig.tight_layout()
    fig.savefig(outpath(outdir, "parameter_identification.png"), dpi=100)
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

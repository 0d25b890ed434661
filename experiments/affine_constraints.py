r"""One elastic affine body under the constraints of Gołubowska, Kovalchuk & Sławianowski
(*Constraints and symmetries in mechanics of affine motion*, Geometry, Integrability and
Quantization XV, Varna 2013), in 2D and 3D.

The same raw initial state — $\varphi_0$ a rotation, $\dot\varphi_0 = \Omega_0\varphi_0$ with
$\Omega_0$ = spin + shear + dilatation — is run with a St Venant–Kirchhoff potential under:
no constraint, gyroscopic (rigid), isochoric, conformal, rotation-free (d'Alembert) and
rotation-free (vakonomic, $\mu_0 = 0$). $\varphi_0$ satisfies every holonomic constraint;
the velocity is projected onto each constraint's admissible velocities with
`cx.consistent_initial_state` (the $W$-orthogonal projection). Figures: the deformed body
(image of the unit circle / of the unit sphere projected on the $x$–$y$ plane) over time,
and the invariants (energy drift, $\det\varphi$, spin $S$, constraint residual) on
symmetric-log axes, on which a value that is exactly 0 is drawn at 0. SI units: mass
1 kg, the inertia $J$ in kg m², energies in J, the spin $S$ in kg m²/s.

    python experiments/affine_constraints.py [--out DIR] [--quick]
"""

import argparse
import json
import os
import time

import matplotlib

matplotlib.use("Agg")

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import constrax as cx  # noqa: E402
from constrax import affine as af  # noqa: E402
from constrax._showcase._common import log_axis_with_zeros  # noqa: E402

jax.config.update("jax_enable_x64", True)

CASES = (
    "free",
    "gyroscopic",
    "isochoric",
    "conformal",
    "rotation-free (d'Alembert)",
    "rotation-free (vakonomic)",
)


def _setup(n):
    if n == 2:
        J = jnp.array([[1.0, 0.2], [0.2, 0.5]])
        th = 0.3
        phi0 = jnp.array([[jnp.cos(th), -jnp.sin(th)], [jnp.sin(th), jnp.cos(th)]])
        Om0 = jnp.array([[0.1, -0.8], [1.0, -0.3]])  # spin + shear + dilatation
    else:
        J = jnp.array([[1.0, 0.2, 0.0], [0.2, 0.6, 0.1], [0.0, 0.1, 0.4]])
        phi0 = jax.scipy.linalg.expm(jnp.array([[0, -0.3, 0.2], [0.3, 0, -0.1], [-0.2, 0.1, 0]]))
        Om0 = jnp.array([[0.2, -0.6, 0.3], [0.9, -0.1, -0.2], [-0.1, 0.5, 0.1]])
    body = af.AffineBody(1.0, J, potential=af.StVenantKirchhoff(2.0, 1.0))
    return body, phi0, Om0 @ phi0


def _constraints(case, det0):
    return {
        "free": (),
        "gyroscopic": (af.gyroscopic(),),
        "isochoric": (af.isochoric(det0),),
        "conformal": (af.conformal(),),
        "rotation-free (d'Alembert)": (af.rotation_free(),),
        "rotation-free (vakonomic)": (af.rotation_free(),),
    }[case]


def _run_case(case, n, t1, n_save, rtol):
    body, phi0, phid0 = _setup(n)
    system = af.affine_system(*_constraints(case, jnp.linalg.det(phi0)))
    prescription = cx.Vakonomic() if "vakonomic" in case else cx.DAlembert()

    @eqx.filter_jit
    def go(body, phi0, phid0):
        q0, qd0 = af.affine_state(body, jnp.zeros(n), phi0, jnp.zeros(n), phid0)
        # phi0 satisfies every holonomic constraint; project the velocity W-orthogonally
        # onto the admissible ones, qd <- qd - W^-1 A^T (A W^-1 A^T)^-1 A qd.
        if system.constraints:
            A = cx.constraint_jacobian(system, 0.0, q0, qd0, body)
            W = cx.mass_matrix(system, 0.0, q0, qd0, body)
            WiAT = jnp.linalg.solve(W, A.T)
            qd0 = qd0 - WiAT @ jnp.linalg.solve(A @ WiAT, A @ qd0)
        mu0 = jnp.zeros(A.shape[0]) if "vakonomic" in case else None
        traj = cx.simulate(
            system,
            q0,
            qd0,
            body,
            t1=t1,
            prescription=prescription,
            mu0=mu0,
            saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, t1, n_save)),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol),
        )
        res = traj.constraint_residual()
        vel = jnp.max(jnp.abs(res.velocity), axis=1, initial=0.0)
        pos = jnp.max(jnp.abs(res.position), axis=1, initial=0.0)
        Q = {
            "phi": traj.q[:, n:].reshape(-1, n, n),
            "det_phi": jnp.linalg.det(traj.q[:, n:].reshape(-1, n, n)),
            "energy": traj.energy(),
            "S": jax.vmap(lambda q, qd: af.angular_momentum(body, q, qd))(traj.q, traj.qd),
        }
        return traj.ts, Q, jnp.maximum(vel, pos), traj.stats["num_steps"]

    return go(body, phi0, phid0)


def _outline(phi, n, k=100):
    s = np.linspace(0, 2 * np.pi, k)
    if n == 2:
        return phi @ np.stack([np.cos(s), np.sin(s)])
    # boundary of the projection of the ellipsoid phi(S^2) on the x-y plane
    P = phi[:2]
    w, V = np.linalg.eigh(P @ P.T)
    return V @ (np.sqrt(np.maximum(w, 0))[:, None] * np.stack([np.cos(s), np.sin(s)]))


def run(outdir, quick: bool = False) -> dict:
    """Run all six cases (2D; 3D too unless `quick`), write the figures into `outdir`,
    return the measured invariants and the figure paths."""
    os.makedirs(outdir, exist_ok=True)
    dims = (2,) if quick else (2, 3)
    t1, n_save, rtol = (2.0, 21, 1e-8) if quick else (6.0, 121, 1e-11)
    out = {"figures": [], "cases": {}}
    start = time.time()
    for n in dims:
        results = {case: _run_case(case, n, t1, n_save, rtol) for case in CASES}
        fig, axes = plt.subplots(
            1,
            len(CASES),
            figsize=(3.0 * len(CASES), 3.4),
            sharex=True,
            sharey=True,
            layout="constrained",
        )
        snaps = np.linspace(0, n_save - 1, 6).astype(int)
        for ax, case in zip(axes, CASES, strict=True):
            ts, Q, _, _ = results[case]
            phi = np.asarray(Q["phi"])
            for j, i in enumerate(snaps):
                color = plt.cm.viridis(j / (len(snaps) - 1))
                ax.plot(*_outline(phi[i], n), color=color, label=f"t={float(ts[i]):.1f}")
                ax.plot([0.0, phi[i][0, 0]], [0.0, phi[i][1, 0]], color=color, lw=0.8)
            ax.set_title(case, fontsize=9)
            ax.set_aspect("equal")
            ax.set_xlabel("x / reference radius")
        axes[0].set_ylabel("y / reference radius")
        fig.suptitle(
            f"{n}D affine body: deformed shape over time (line: image of material axis a^1)"
        )
        ts0 = np.asarray(results[CASES[0]][0])
        times = plt.cm.ScalarMappable(
            cmap=plt.cm.viridis, norm=plt.Normalize(float(ts0[snaps[0]]), float(ts0[snaps[-1]]))
        )
        fig.colorbar(times, ax=list(axes), label="t [s] (colour of the outlines)", shrink=0.9)
        path = os.path.join(outdir, f"affine_constraints_shapes_{n}d.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out["figures"].append(path)

        fig, axes = plt.subplots(1, 4, figsize=(16, 4.4), layout="constrained")
        logged = {0: [], 2: [], 3: []}  # the symlog panels' series, case by case
        for case in CASES:
            ts, Q, resid, steps = results[case]
            E = np.asarray(Q["energy"])
            S = np.asarray(Q["S"])
            metrics = {
                "energy_drift": float(np.max(np.abs(E - E[0]))),
                "det_phi_range": [float(np.min(Q["det_phi"])), float(np.max(Q["det_phi"]))],
                "det_phi_drift": float(np.max(np.abs(Q["det_phi"] - Q["det_phi"][0]))),
                "spin_drift": float(np.max(np.abs(S - S[0]))),
                "max_constraint_residual": float(np.max(resid)),
                "num_steps": int(steps),
            }
            out["cases"][f"{n}d/{case}"] = metrics
            series = {
                0: np.abs(E - E[0]),
                2: np.max(np.abs(S - S[0]), axis=(1, 2)),
                3: np.asarray(resid),
            }
            for i, y in series.items():
                axes[i].plot(ts, y, label=case)
                logged[i].append((case, y))
            axes[1].plot(ts, Q["det_phi"], label=case)
        titles = (
            ("energy drift", r"$|E(t) - E(0)|$ [J]"),
            ("volume", r"$\det\varphi$ [1]"),
            ("spin drift", r"$\max_{ij}|S_{ij}(t) - S_{ij}(0)|$ [kg m²/s]"),
            ("constraint residual", "max |residual| (position and velocity rows)"),
        )
        for i, (ax, (title, ylabel)) in enumerate(zip(axes, titles, strict=True)):
            ax.set_title(title)
            ax.set_ylabel(ylabel)
            ax.set_xlabel("t [s]")
            if i in logged:
                log_axis_with_zeros(ax, *(y for _, y in logged[i]))
                zero = [c for c, y in logged[i] if not np.any(y)]
                if zero:
                    ax.text(
                        0.98, 0.04, "exactly 0: " + ", ".join(zero), transform=ax.transAxes,
                        ha="right", va="bottom", fontsize=7, color="0.3",
                    )  # fmt: skip
        handles, labels = axes[1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(CASES), fontsize=8)
        fig.suptitle(f"{n}D affine body: invariants")
        path = os.path.join(outdir, f"affine_constraints_invariants_{n}d.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out["figures"].append(path)
    out["seconds"] = time.time() - start
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/figures")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.out, quick=args.quick), indent=2))

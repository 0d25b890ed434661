r"""Reduced descriptions of rotation-free affine motion (published forms), as independent paths.

Sławianowski et al. 2013. Written for Euclidean metrics $g = \eta = 1$ (the published explicit
forms). With $\varphi = UA$ ($U$ orthogonal, $A$ symmetric positive) the rotation-free constraint
($\Omega$ symmetric) is equivalent to

$$\hat\omega = U^{-1}\dot U = \tfrac12[A^{-1}, \dot A],$$

so a rotation-free motion is a curve $A(t)$ of symmetric matrices plus the reconstruction
$\dot U = U\hat\omega$, $\varphi = UA$. With $X = \dot A + \hat\omega A = \tfrac12(B + \dot A)$,
$B = A^{-1}\dot AA$, the internal kinetic energy
$\tfrac12\operatorname{tr}(\dot\varphi J\dot\varphi^\top)
= \tfrac12\operatorname{tr}(XJX^\top)$ becomes

$$T^\mathrm{Vak}_\mathrm{int} = \tfrac18\operatorname{tr}(\dot AJ\dot A)
+ \tfrac14\operatorname{tr}(BJ\dot A) + \tfrac18\operatorname{tr}(BJB^\top).$$

**Misprints (vakonomic Lagrangian).** The paper writes the first term as
$\tfrac12\eta_{KL}\dot A^K{}_A\dot A^L{}_BJ^{AB}$: that is the first term of $T_\mathrm{int}$
*before* substitution. The cross and quadratic terms of $\hat\omega$ also contain
$-\tfrac12\dot A$ and contribute $-\tfrac12 + \tfrac18$ of it; the correct coefficient is
$\tfrac18$ (`printed_vakonomic_kinetic` is the published literal form; the difference is
exactly $\tfrac38\operatorname{tr}(\dot AJ\dot A)$).

**Misprints (usual equations).** From $\varphi J\ddot\varphi^\top = N + N_R$ with $N_R$
antisymmetric and
$\ddot\varphi = U(\ddot A + 2\hat\omega\dot A + \dot{\hat\omega}A + \hat\omega^2A)$,
the symmetric part of

$$AJ\ddot A - AJ\dot A\,c - \tfrac12 AJA\,\dot c + \tfrac14 AJA\,c^2 = \bar N,
\qquad c = [A^{-1}, \dot A],$$

holds, $\bar N = U^\top NU = A\hat NA$. The published tensor equation has $-AJ\,\dot c$ in
the third term (should be $-AJ\dot A\,c$: its own explicit form has $\dot A$ there) and
$\tfrac14AJA\,\tfrac{d}{dt}c^2$ in the fourth (should be $\tfrac14AJA\,c^2$, again as in its
explicit form). `printed_usual_terms` returns the published literal terms so tests can pin this.

**Vakonomic coincidence.** The generic engine's vakonomic motion ($\mu$ in the state)
coincides with the Euler–Lagrange motion of $T^\mathrm{Vak}_\mathrm{int} - V$ plus
reconstruction iff the initial multipliers make the momentum of
$\Lambda = L - \mu\cdot c$ conjugate to rotations vanish, i.e. $\varphi\,(\partial\Lambda/
\partial\dot\varphi)^\top g^{-1}$ symmetric (for $g = 1$ and the rows of `rotation_free`:
$\mu_{ij} = -S_{ij}/2$). That condition is preserved by the flow (Euler–Poincaré:
$\dot\pi = [\pi, \hat\omega]$), see `vakonomic_spin_free_mu0`. Other $\mu_0$ give other
vakonomic motions, which do not follow from the reduced Lagrangian.
"""

from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._dynamics import accelerations
from .._system import System
from ._body import AffineBody, split
from ._constraints import rotation_free_one_form
from ._elastic import AbstractHyperelastic


def sym_from_vec(a: Float[Array, " s"], n: int) -> Float[Array, "n n"]:
    """Symmetric `(n, n)` matrix from its `n(n+1)/2` upper-triangle entries (row-major)."""
    iu = np.triu_indices(n)
    M = jnp.zeros((n, n), a.dtype).at[iu].set(a)
    return M + M.T - jnp.diag(jnp.diagonal(M))


def vec_from_sym(A: Float[Array, "n n"]) -> Float[Array, " s"]:
    """The `n(n+1)/2` upper-triangle entries of a symmetric matrix."""
    return A[np.triu_indices(A.shape[0])]


def commutator(X, Y):
    return X @ Y - Y @ X


def rotation_free_omega_hat(
    A: Float[Array, "n n"], A_dot: Float[Array, "n n"]
) -> Float[Array, "n n"]:
    r"""$\hat\omega = \tfrac12[A^{-1}, \dot A]$ (Sławianowski et al. 2013).

    **Example:** `rotation_free_omega_hat(A, A_dot)`.
    """
    return 0.5 * commutator(jnp.linalg.inv(A), A_dot)


def vakonomic_kinetic(A, A_dot, J) -> Float[Array, ""]:
    r"""$T^\mathrm{Vak}_\mathrm{int}(A, \dot A) = \tfrac12\operatorname{tr}(XJX^\top)$,
    $X = \dot A + \hat\omega A$, $\hat\omega = \tfrac12[A^{-1}, \dot A]$ (first principles).

    **Example:** `vakonomic_kinetic(A, A_dot, J)`.
    """
    X = A_dot + rotation_free_omega_hat(A, A_dot) @ A
    return 0.5 * jnp.trace(X @ J @ X.T)


def printed_vakonomic_kinetic(A, A_dot, J) -> Float[Array, ""]:
    r"""The published literal $T^\mathrm{Vak}_\mathrm{int}$ (with its typo in the first
    coefficient): $\tfrac12\operatorname{tr}(\dot AJ\dot A) + \tfrac14\operatorname{tr}(BJ\dot A)
    + \tfrac18\operatorname{tr}(BJB^\top)$, $B = A^{-1}\dot AA$.

    **Example:** `printed_vakonomic_kinetic(A, A_dot, J) - vakonomic_kinetic(A, A_dot, J)`.
    """
    B = jnp.linalg.solve(A, A_dot @ A)
    return (
        0.5 * jnp.trace(A_dot @ J @ A_dot.T)
        + 0.25 * jnp.trace(B @ J @ A_dot.T)
        + 0.125 * jnp.trace(B @ J @ B.T)
    )


def _check_euclidean(body: AffineBody):
    if not isinstance(body, AffineBody):
        raise TypeError(f"expected an AffineBody, got {type(body).__name__}")
    if body.potential is not None and not isinstance(body.potential, AbstractHyperelastic):
        raise ValueError(
            "the reduced rotation-free descriptions need a hyperelastic potential V(G) "
            f"(AbstractHyperelastic) or None, got {type(body.potential).__name__}"
        )


def _V(body: AffineBody, G):
    if body.potential is None:
        return jnp.zeros((), G.dtype)
    return body.potential.energy(G, jnp.eye(body.n, dtype=G.dtype))


def reduced_vakonomic_system(body: AffineBody) -> System:
    r"""`cx.System` on the $n(n+1)/2$ entries of symmetric $A$ with
    $L = T^\mathrm{Vak}_\mathrm{int}(A, \dot A) - V(G = A^2)$ (Sławianowski et al. 2013).

    Its Euler–Lagrange equations (by autodiff) are the published vakonomic equations of
    rotation-free motion; parameters `p` are the body.

    **Example:** `cx.accelerations(reduced_vakonomic_system(body), 0.0, a, ad, body)`.
    """
    _check_euclidean(body)
    n = body.n

    def L(t, a, ad, body):
        A, Ad = sym_from_vec(a, n), sym_from_vec(ad, n)
        return vakonomic_kinetic(A, Ad, body.J) - _V(body, A @ A)

    return System(lagrangian=L)


def reduced_dipole(body: AffineBody, A) -> Float[Array, "n n"]:
    r"""$\bar N = A\hat NA = -2A\,(\partial V/\partial G)\,A$ for hyperelastic $V(G)$, $G = A^2$."""
    if body.potential is None:
        return jnp.zeros_like(A)
    VG = jax.grad(lambda G: _V(body, G))(A @ A)
    return -2.0 * A @ VG @ A


def _sym(X):
    return 0.5 * (X + X.T)


def usual_rotation_free_residual(A, A_dot, A_ddot, J, Nbar) -> Float[Array, "n n"]:
    r"""Residual of the corrected usual (d'Alembert) rotation-free equations (module docstring):
    $\operatorname{sym}(AJ\ddot A - AJ\dot A\,c - \tfrac12AJA\,\dot c + \tfrac14AJA\,c^2 - \bar N)$,
    $c = [A^{-1}, \dot A]$.

    **Example:** `usual_rotation_free_residual(A, Ad, Add, J, reduced_dipole(body, A))`.
    """
    Ai = jnp.linalg.inv(A)
    c = commutator(Ai, A_dot)
    c_dot = commutator(Ai, A_ddot) - commutator(Ai @ A_dot @ Ai, A_dot)
    AJ = A @ J
    return _sym(AJ @ A_ddot - AJ @ A_dot @ c - 0.5 * AJ @ A @ c_dot + 0.25 * AJ @ A @ c @ c - Nbar)


def printed_usual_terms(A, A_dot, A_ddot, J) -> dict[str, Float[Array, "n n"]]:
    r"""The four left-hand terms of the published usual tensor equation, literally, next to the
    first-principles ones (module docstring): keys `"T1"`, `"T2"`, `"T3_printed"`, `"T3"`,
    `"T4_printed"` ($\tfrac14AJA\,\dot c^2$), `"T4_printed_alt"` ($\tfrac14AJA\,\tfrac{d}{dt}c^2$),
    `"T4"`.

    **Example:** `printed_usual_terms(A, Ad, Add, J)["T3_printed"]`.
    """
    Ai = jnp.linalg.inv(A)
    c = commutator(Ai, A_dot)
    c_dot = commutator(Ai, A_ddot) - commutator(Ai @ A_dot @ Ai, A_dot)
    AJ = A @ J
    return {
        "T1": AJ @ A_ddot,
        "T2": -0.5 * AJ @ A @ c_dot,
        "T3_printed": -AJ @ c_dot,
        "T3": -AJ @ A_dot @ c,
        "T4_printed": 0.25 * AJ @ A @ c_dot @ c_dot,
        "T4_printed_alt": 0.25 * AJ @ A @ (c_dot @ c + c @ c_dot),
        "T4": 0.25 * AJ @ A @ c @ c,
    }


def usual_rotation_free_acceleration(body: AffineBody, A, A_dot) -> Float[Array, "n n"]:
    r"""$\ddot A$ from the corrected usual equations (linear in $\ddot A$, solved on the
    $n(n+1)/2$ symmetric entries).

    **Example:** `usual_rotation_free_acceleration(body, A, A_dot)`.
    """
    _check_euclidean(body)
    n = body.n
    Nbar = reduced_dipole(body, A)
    res = lambda add: vec_from_sym(
        usual_rotation_free_residual(A, A_dot, sym_from_vec(add, n), body.J, Nbar)
    )
    z = jnp.zeros(n * (n + 1) // 2, A.dtype)
    r0, lin = jax.linearize(res, z)
    M = jax.vmap(lin, out_axes=1)(jnp.eye(z.shape[0], dtype=A.dtype))
    return sym_from_vec(jnp.linalg.solve(M, -r0), n)


class ReducedTrajectory(eqx.Module):
    """Output of `simulate_reduced`: `ts`, `A`, `A_dot`, `U` and `phi = U A` (leading time axis)."""

    ts: Float[Array, " k"]
    A: Float[Array, "k n n"]
    A_dot: Float[Array, "k n n"]
    U: Float[Array, "k n n"]
    phi: Float[Array, "k n n"]


def simulate_reduced(
    body: AffineBody,
    A0: Float[Array, "n n"],
    A_dot0: Float[Array, "n n"],
    U0: Float[Array, "n n"],
    ts: Float[Array, " k"],
    *,
    kind: Literal["vakonomic", "usual"],
    rtol: float = 1e-11,
    atol: float = 1e-11,
    max_steps: int = 100_000,
) -> ReducedTrajectory:
    r"""Integrate the published reduced rotation-free equations and reconstruct $\varphi = UA$.

    `kind="vakonomic"`: Euler–Lagrange of $T^\mathrm{Vak}_\mathrm{int} - V(A^2)$ by autodiff
    (`reduced_vakonomic_system`); `kind="usual"`: the corrected usual equations
    (`usual_rotation_free_acceleration`). Both with $\dot U = U\hat\omega$,
    $\hat\omega = \tfrac12[A^{-1}, \dot A]$ (Sławianowski et al. 2013).

    **Example:** `simulate_reduced(body, A0, Ad0, U0, ts, kind="usual").phi`.
    """
    _check_euclidean(body)
    n = body.n
    if kind == "vakonomic":
        red = reduced_vakonomic_system(body)

        def Add(A, Ad):
            return sym_from_vec(
                accelerations(red, 0.0, vec_from_sym(A), vec_from_sym(Ad), body).qdd, n
            )
    elif kind == "usual":
        Add = lambda A, Ad: usual_rotation_free_acceleration(body, A, Ad)
    else:
        raise ValueError(f"`kind` must be 'vakonomic' or 'usual', got {kind!r}")

    def vf(t, y, args):
        A, Ad, U = y
        return (Ad, Add(A, Ad), U @ rotation_free_omega_hat(A, Ad))

    ts = jnp.asarray(ts, dtype=float)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vf),
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        (jnp.asarray(A0, float), jnp.asarray(A_dot0, float), jnp.asarray(U0, float)),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
    )
    A, Ad, U = sol.ys
    return ReducedTrajectory(ts=sol.ts, A=A, A_dot=Ad, U=U, phi=U @ A)


def vakonomic_spin_free_mu0(body: AffineBody, q, qd) -> Float[Array, " k"]:
    r"""Initial multipliers of `rotation_free()` under `cx.Vakonomic()` for which the generic
    engine reproduces the reduced $T^\mathrm{Vak}_\mathrm{int}$ motion.

    Solves (least squares)
    $\operatorname{skew}\big(\varphi\,(\partial\Lambda/\partial\dot\varphi)^\top
    g^{-1}\big) = 0$ for $\mu$, $\Lambda = L - \mu\cdot\omega(q)\dot q$: the momentum of
    $\Lambda$ conjugate to spatial rotations vanishes (module docstring). For $g = 1$ this is
    $\mu_{ij} = -S_{ij}/2$, $i < j$.

    **Example:** `mu0 = vakonomic_spin_free_mu0(body, q0, qd0)`.
    """
    _, phi = split(body, q)
    _, phid = split(body, qd)
    W = rotation_free_one_form(body, q)
    gi = jnp.linalg.inv(body.g)
    iu = np.triu_indices(body.n, 1)

    def skew_rows(mu):
        _, P = split(body, W.T @ mu)
        X = phi @ (body.g @ phid @ body.J - P).T @ gi
        return (X - X.T)[iu]

    mu0 = jnp.zeros(W.shape[0], q.dtype)
    r0, lin = jax.linearize(skew_rows, mu0)
    M = jax.vmap(lin, out_axes=1)(jnp.eye(mu0.shape[0], dtype=q.dtype))
    return jnp.linalg.lstsq(M, -r0)[0]

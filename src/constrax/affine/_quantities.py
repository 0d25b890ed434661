r"""Derived quantities of affine motion (Sławianowski et al. 2013).

* affine velocity $\Omega = \dot\varphi\varphi^{-1}$, co-moving
  $\hat\Omega = \varphi^{-1}\dot\varphi$;
* affine spin $K^{ij} = \varphi^i{}_K\dot\varphi^j{}_L J^{KL}$, angular momentum
  $S = K - K^\top$;
* force $F^i = -g^{ij}\partial V/\partial r^j$, dipole
  $N^{ij} = -\varphi^i{}_A\,\partial V/\partial\varphi^k{}_A\,g^{kj}$;
* reaction force and dipole from the engine's generalized reaction $R$:
  $F_R^i = g^{ij}R_{r^j}$, $N_R^{ij} = \varphi^i{}_A R_{\varphi^k{}_A} g^{kj}$;
* polar decomposition $\varphi = UA$ and $\hat\omega = U^{-1}\dot U$.

Derivation of $N_R$: the Euler–Lagrange equation of $\varphi$ is
$g\ddot\varphi J = -\partial V/\partial\varphi + R_\varphi$ (matrices indexed $(k, A)$).
Multiplying by $\varphi$ and $g^{-1}$,
$\varphi J\ddot\varphi^\top = N + \varphi R_\varphi^\top g^{-1}$, i.e. the published balance
$\varphi^i{}_K\ddot\varphi^j{}_L J^{KL} = N^{ij} + N_R^{ij}$.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._trajectory import Trajectory
from ._body import AffineBody, potential_energy, split
from ._elastic import green_tensor


def affine_velocity(body: AffineBody, q, qd) -> Float[Array, "n n"]:
    r"""Affine velocity (Eringen's gyration) $\Omega = \dot\varphi\varphi^{-1}$.

    **Example:** `affine_velocity(body, q, qd)`.
    """
    _, phi = split(body, q)
    _, phid = split(body, qd)
    return jnp.linalg.solve(phi.T, phid.T).T


def comoving_affine_velocity(body: AffineBody, q, qd) -> Float[Array, "n n"]:
    r"""Co-moving affine velocity $\hat\Omega = \varphi^{-1}\dot\varphi$.

    **Example:** `comoving_affine_velocity(body, q, qd)`.
    """
    _, phi = split(body, q)
    _, phid = split(body, qd)
    return jnp.linalg.solve(phi, phid)


def affine_spin(body: AffineBody, q, qd) -> Float[Array, "n n"]:
    r"""Affine spin $K^{ij} = \varphi^i{}_K\dot\varphi^j{}_L J^{KL}$ (Sławianowski et al. 2013).

    As a matrix, $K = \varphi J\dot\varphi^\top$.

    **Example:** `affine_spin(body, q, qd)`.
    """
    _, phi = split(body, q)
    _, phid = split(body, qd)
    return phi @ body.J @ phid.T


def angular_momentum(body: AffineBody, q, qd) -> Float[Array, "n n"]:
    r"""Internal angular momentum (spin) $S = K - K^\top$; $\dot S = N - N^\top$.

    **Example:** `angular_momentum(body, q, qd)`.
    """
    K = affine_spin(body, q, qd)
    return K - K.T


def _dV(body, q):
    return jax.grad(lambda q_: potential_energy(body, q_))(q)


def force(body: AffineBody, q) -> Float[Array, " n"]:
    r"""Total force $F^i = -g^{ij}\partial V/\partial r^j$ (Sławianowski et al. 2013).

    **Example:** `force(body, q)`.
    """
    dr, _ = split(body, _dV(body, q))
    return -jnp.linalg.solve(body.g, dr)


def dipole(body: AffineBody, q) -> Float[Array, "n n"]:
    r"""Dipole of forces $N^{ij} = -\varphi^i{}_A\,\partial V/\partial\varphi^k{}_A\,g^{kj}$.

    **Example:** `dipole(body, q)`.
    """
    _, phi = split(body, q)
    _, D = split(body, _dV(body, q))
    return -phi @ jnp.linalg.solve(body.g, D).T


def reaction_force(body: AffineBody, R) -> Float[Array, " n"]:
    r"""Reaction force $F_R^i = g^{ij}R_{r^j}$ from the engine's generalized reaction `R`.

    **Example:** `reaction_force(body, cx.accelerations(...).reactions)`.
    """
    Rr, _ = split(body, R)
    return jnp.linalg.solve(body.g, Rr)


def reaction_dipole(body: AffineBody, q, R) -> Float[Array, "n n"]:
    r"""Reaction dipole $N_R^{ij} = \varphi^i{}_A R_{\varphi^k{}_A} g^{kj}$.

    From $g\ddot\varphi J = -\partial V/\partial\varphi + R_\varphi$ one gets
    $\varphi J\ddot\varphi^\top = N + N_R$ (module docstring). `R` is
    `cx.accelerations(...).reactions` (or `traj.reactions()` row by row).

    **Example:** `reaction_dipole(body, q, out.reactions)`.
    """
    _, phi = split(body, q)
    _, Rphi = split(body, R)
    return phi @ jnp.linalg.solve(body.g, Rphi).T


class Polar(eqx.Module):
    r"""Polar decomposition $\varphi = UA$ and its rates (Sławianowski et al. 2013).

    - `U`: isometry, $U^\top gU = \eta$; `A`: $\eta$-symmetric positive, $\eta A = (\eta A)^\top$.
    - `U_dot`, `A_dot`: time derivatives along $\dot\varphi$.
    - `omega_hat`: co-moving angular velocity $\hat\omega = U^{-1}\dot U$ ($\eta$-skew).
    """

    U: Float[Array, "n n"]
    A: Float[Array, "n n"]
    U_dot: Float[Array, "n n"]
    A_dot: Float[Array, "n n"]
    omega_hat: Float[Array, "n n"]


def polar_decomposition(body: AffineBody, q, qd) -> Polar:
    r"""Polar decomposition $\varphi = UA$ with $\hat\omega = U^{-1}\dot U$.

    With $g = L_gL_g^\top$, $\eta = L_\eta L_\eta^\top$: $\tilde\varphi = L_g^\top\varphi
    L_\eta^{-\top} = \tilde U\tilde A$ (Euclidean polar decomposition by `eigh`), then
    $U = L_g^{-\top}\tilde UL_\eta^\top$, $A = L_\eta^{-\top}\tilde AL_\eta^\top$. The rate
    $\dot{\tilde A}$ solves the Sylvester equation $\tilde A\dot{\tilde A} + \dot{\tilde A}\tilde A
    = \dot{\tilde C}$ in the eigenbasis (always solvable: $\sigma_i + \sigma_j > 0$), and
    $\dot U = (\dot\varphi - U\dot A)A^{-1}$.

    **Example:** `pol = polar_decomposition(body, q, qd); pol.omega_hat`.
    """
    _, phi = split(body, q)
    _, phid = split(body, qd)
    Lg = jnp.linalg.cholesky(body.g)
    Le = jnp.linalg.cholesky(body.eta)
    to_t = lambda X: jnp.linalg.solve(Le, (Lg.T @ X).T).T  # Lg^T X Le^{-T}
    pt, pdt = to_t(phi), to_t(phid)
    C = pt.T @ pt
    Cd = pdt.T @ pt + pt.T @ pdt
    s, V = jnp.linalg.eigh(C)
    sig = jnp.sqrt(s)
    At = (V * sig) @ V.T
    Atinv = (V / sig) @ V.T
    Adt = V @ ((V.T @ Cd @ V) / (sig[:, None] + sig[None, :])) @ V.T
    Ut = pt @ Atinv
    Udt = (pdt - Ut @ Adt) @ Atinv
    back_U = lambda X: jnp.linalg.solve(Lg.T, X) @ Le.T  # Lg^{-T} X Le^T
    back_A = lambda X: jnp.linalg.solve(Le.T, X) @ Le.T  # Le^{-T} X Le^T
    omega_t = Ut.T @ Udt
    return Polar(
        U=back_U(Ut), A=back_A(At), U_dot=back_U(Udt), A_dot=back_A(Adt), omega_hat=back_A(omega_t)
    )


class AffineQuantities(eqx.Module):
    r"""Derived quantities along a trajectory (leading time axis), see `affine_quantities`.

    `r`, `phi`, `det_phi`, `green` ($G$), `Omega`, `Omega_hat`, `spin` ($K$),
    `angular_momentum` ($S$), `force` ($F$), `dipole` ($N$), `reaction_force` ($F_R$),
    `reaction_dipole` ($N_R$), `energy`.
    """

    r: Float[Array, "k n"]
    phi: Float[Array, "k n n"]
    det_phi: Float[Array, " k"]
    green: Float[Array, "k n n"]
    Omega: Float[Array, "k n n"]
    Omega_hat: Float[Array, "k n n"]
    spin: Float[Array, "k n n"]
    angular_momentum: Float[Array, "k n n"]
    force: Float[Array, "k n"]
    dipole: Float[Array, "k n n"]
    reaction_force: Float[Array, "k n"]
    reaction_dipole: Float[Array, "k n n"]
    energy: Float[Array, " k"]


def affine_quantities(traj: Trajectory) -> AffineQuantities:
    r"""All derived quantities of affine motion along a `Trajectory` of an affine body (`traj.p`).

    Compiled once per trajectory structure (`equinox.filter_jit`).

    **Example:** `Q = affine_quantities(traj); Q.angular_momentum[-1] - Q.angular_momentum[0]`.
    """
    if not isinstance(traj.p, AffineBody):
        raise TypeError(
            f"affine_quantities needs a trajectory simulated with p = an AffineBody, got "
            f"{type(traj.p).__name__}"
        )
    return _affine_quantities(traj)


@eqx.filter_jit
def _affine_quantities(traj: Trajectory) -> AffineQuantities:
    body = traj.p
    R = traj.reactions()

    def one(q, qd, R):
        r, phi = split(body, q)
        return AffineQuantities(
            r=r,
            phi=phi,
            det_phi=jnp.linalg.det(phi),
            green=green_tensor(phi, body.g),
            Omega=affine_velocity(body, q, qd),
            Omega_hat=comoving_affine_velocity(body, q, qd),
            spin=affine_spin(body, q, qd),
            angular_momentum=angular_momentum(body, q, qd),
            force=force(body, q),
            dipole=dipole(body, q),
            reaction_force=reaction_force(body, R),
            reaction_dipole=reaction_dipole(body, q, R),
            energy=jnp.zeros(()),
        )

    out = jax.vmap(one)(traj.q, traj.qd, R)
    return eqx.tree_at(lambda o: o.energy, out, traj.energy())

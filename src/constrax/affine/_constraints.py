r"""Constraint builders of affine motion, returning ordinary constraints of the core engine.

Sławianowski et al. 2013. Each builder returns a
`cx.Holonomic` or `cx.Pfaffian` whose functions read the metrics from `p`, the
`AffineBody`; use them with `affine_system(...)` under `cx.DAlembert()` or `cx.Vakonomic()`.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._constraints import Holonomic, Pfaffian
from ._body import AffineBody, split
from ._elastic import green_tensor


def _upper(n: int, k: int = 0):
    return np.triu_indices(n, k)


def gyroscopic() -> Holonomic:
    r"""Gyroscopic (metrically rigid) constraint $g_{ij}\varphi^i{}_A\varphi^j{}_B = \eta_{AB}$.

    Sławianowski et al. 2013: holonomic, $n(n+1)/2$ rows (upper triangle of
    $G - \eta$). The affine body becomes a rigid body with inertia
    $I = \operatorname{tr}(J)\,1 - J$ (for $g = \eta = 1$); the reaction dipole $N_R$ is
    symmetric.

    **Example:** `affine_system(gyroscopic())`.
    """

    def gyroscopic(t, q, body: AffineBody):
        _, phi = split(body, q)
        D = green_tensor(phi, body.g) - body.eta
        return D[_upper(body.n)]

    return Holonomic(gyroscopic)


def isochoric(det0: Float[ArrayLike, ""]) -> Holonomic:
    r"""Isochoric (incompressible) constraint $\det\varphi = \det\varphi_0$.

    Sławianowski et al. 2013: one holonomic row; at velocity level
    $\operatorname{tr}\Omega = 0$. The reaction dipole is a pure trace
    $N_R^{ij} = \lambda g^{ij}$.

    **Arguments:** `det0`: the conserved value of $\det\varphi$ (e.g. `jnp.linalg.det(phi0)`).

    **Example:** `affine_system(isochoric(jnp.linalg.det(phi0)))`.
    """

    def isochoric(t, q, body: AffineBody):
        _, phi = split(body, q)
        return jnp.linalg.det(phi) - det0

    return Holonomic(isochoric)


def conformal_factor(body: AffineBody, q: Float[Array, " d"]) -> Float[Array, ""]:
    r"""The conformal factor $\lambda = \operatorname{tr}(\eta^{-1}G)/n$ of $G = \lambda\eta$.

    **Example:** `conformal_factor(body, q)`.
    """
    _, phi = split(body, q)
    G = green_tensor(phi, body.g)
    return jnp.trace(jnp.linalg.solve(body.eta, G)) / body.n


_CONFORMAL_COLLAPSE = (
    "conformal constraint: the conformal factor lambda of phi^T g phi = lambda eta reached "
    "lambda <= 0 (the body collapsed through a point: det phi <= 0); the conformal group "
    "needs lambda > 0"
)


def conformal() -> Holonomic:
    r"""Conformal constraint $\varphi^\top g\varphi = \lambda\eta$ with free $\lambda > 0$.

    Sławianowski et al. 2013: rotations and dilatations,
    $\Omega = \omega + \alpha 1$. $\lambda$ is eliminated: with $\eta = CC^\top$ and
    $\tilde G = C^{-1}GC^{-\top}$, the rows are the off-diagonal entries of $\tilde G$
    and the differences $\tilde G_{ii} - \tilde G_{i+1,i+1}$: $n(n+1)/2 - 1$ independent
    holonomic rows. Reaction dipoles are symmetric and $g$-traceless. Reaching
    $\det\varphi \le 0$ (i.e. $\lambda\to 0$, a collapse through a point) raises. In 2D
    $-1\in SO(2)$, so a collapse through the point keeps $\det\varphi > 0$ on both sides and
    is only caught if a step lands on $\det\varphi \le 0$; in 3D it flips the sign and is.

    **Example:** `affine_system(conformal())`.
    """

    def conformal(t, q, body: AffineBody):
        n = body.n
        _, phi = split(body, q)
        phi = eqx.error_if(phi, jnp.linalg.det(phi) <= 0, _CONFORMAL_COLLAPSE)
        C = jnp.linalg.cholesky(body.eta)
        X = jnp.linalg.solve(C, phi.T @ body.g @ phi)
        Gt = jnp.linalg.solve(C, X.T).T  # C^{-1} G C^{-T}
        diag = jnp.diagonal(Gt)
        return jnp.concatenate([Gt[_upper(n, 1)], diag[:-1] - diag[1:]])

    return Holonomic(conformal)


def rotation_free_one_form(body: AffineBody, q: Float[Array, " d"]) -> Float[Array, "k d"]:
    r"""Rows $\omega(q)$ of the rotation-free constraint: the $i<j$ entries of
    $g\Omega - (g\Omega)^\top$ as linear forms in $\dot q$, $\Omega = \dot\varphi\varphi^{-1}$.

    $\partial(g\dot\varphi\varphi^{-1})_{ij}/\partial\dot\varphi^k{}_A
    = g_{ik}(\varphi^{-1})^A{}_j$.

    **Example:** `rotation_free_one_form(body, q) @ qd` is the skew part of $g\Omega$.
    """
    n = body.n
    _, phi = split(body, q)
    Pinv = jnp.linalg.inv(phi)
    W = jnp.einsum("ik,aj->ijka", body.g, Pinv) - jnp.einsum("jk,ai->ijka", body.g, Pinv)
    rows = W[_upper(n, 1)].reshape(-1, n * n)
    return jnp.concatenate([jnp.zeros((rows.shape[0], n), rows.dtype), rows], axis=1)


def rotation_free() -> Pfaffian:
    r"""Rotation-free constraint: $\Omega$ is $g$-symmetric, $g\Omega = (g\Omega)^\top$.

    Sławianowski et al. 2013: $n(n-1)/2$ truly
    nonholonomic one-forms (`cx.Pfaffian`). Under d'Alembert the reaction dipole $N_R$ is
    antisymmetric; under the vakonomic prescription the reactions also carry the curl term.

    **Example:** `affine_system(rotation_free())`.
    """

    def rotation_free(t, q, body: AffineBody):
        return rotation_free_one_form(body, q)

    return Pfaffian(rotation_free)

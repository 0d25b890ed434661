r"""The affine body: configuration $(r, \varphi)$, kinetic energy and Lagrangian.

Sławianowski et al. 2013: material points move as
$x^i = r^i + \varphi^i{}_K a^K$, $\varphi\in GL(n)$, with

$$T = \frac{M}{2} g_{ij}\dot r^i\dot r^j + \frac12 g_{ij}\dot\varphi^i{}_K\dot\varphi^j{}_L J^{KL},
\qquad L = T - V(r, \varphi).$$

Generalized coordinates: `q = concat([r, phi.reshape(-1)])` (row-major $\varphi^i{}_K$ at
index `n + i*n + K`), so an affine body is an ordinary `cx.System` whose parameters `p`
are the `AffineBody` itself (differentiate with respect to its arrays freely).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._system import System
from ._elastic import AbstractPotential


def _spd_violation(X):
    """True where `X` is not symmetric positive definite (value check, jit-safe)."""
    scale = jnp.maximum(jnp.max(jnp.abs(X)), jnp.finfo(X.dtype).tiny)
    asym = jnp.max(jnp.abs(X - X.T)) > 1e-10 * scale
    chol = jnp.linalg.cholesky(0.5 * (X + X.T))
    return asym | ~jnp.all(jnp.isfinite(chol))


class AffineBody(eqx.Module):
    r"""An affine body in dimension $n = 2$ or $3$ (Sławianowski et al. 2013).

    $T = \frac M2 g(\dot r, \dot r) + \frac12 g_{ij}\dot\varphi^i{}_K\dot\varphi^j{}_L J^{KL}$,
    $V = V(r, \varphi)$.

    **Arguments:**

    - `mass`: total mass $M > 0$.
    - `J`: material inertia tensor $J^{KL} = \int a^K a^L d\mu$, symmetric positive
      definite, shape `(n, n)` with `n` in {2, 3}.
    - `g`: spatial metric `(n, n)` (default identity); `eta`: material metric `(n, n)`
      (default identity). Both symmetric positive definite.
    - `potential`: an `AbstractPotential` (e.g. `StVenantKirchhoff`) or `None`.

    Non-symmetric or indefinite `J`, `g`, `eta` raise (`eqx.error_if`, also under jit);
    wrong shapes raise `ValueError`.

    **Example:**

    ```python
    body = AffineBody(1.0, jnp.diag(jnp.array([1.0, 2.0, 3.0])),
                      potential=StVenantKirchhoff(1.0, 0.5))
    system = affine_system(gyroscopic())
    spin = jnp.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    q0, qd0 = affine_state(body, jnp.zeros(3), jnp.eye(3), jnp.zeros(3), spin)  # rigid spin
    traj = cx.simulate(system, q0, qd0, body, t1=1.0)
    ```
    """

    mass: Float[Array, ""]
    J: Float[Array, "n n"]
    g: Float[Array, "n n"]
    eta: Float[Array, "n n"]
    potential: AbstractPotential | None
    n: int = eqx.field(static=True)

    def __init__(
        self,
        mass: Float[ArrayLike, ""],
        J: Float[ArrayLike, "n n"],
        g: Float[ArrayLike, "n n"] | None = None,
        eta: Float[ArrayLike, "n n"] | None = None,
        potential: AbstractPotential | None = None,
    ):
        J = jnp.asarray(J, dtype=float)
        if J.ndim != 2 or J.shape[0] != J.shape[1] or J.shape[0] not in (2, 3):
            raise ValueError(
                f"`J` must be a square (n, n) inertia tensor with n = 2 or 3, got shape {J.shape}"
            )
        n = J.shape[0]
        g = jnp.eye(n, dtype=J.dtype) if g is None else jnp.asarray(g, dtype=J.dtype)
        eta = jnp.eye(n, dtype=J.dtype) if eta is None else jnp.asarray(eta, dtype=J.dtype)
        for name, X in (("g", g), ("eta", eta)):
            if X.shape != (n, n):
                raise ValueError(
                    f"`{name}` must be an (n, n) = ({n}, {n}) metric matching `J`, got shape "
                    f"{X.shape}"
                )
        mass = jnp.asarray(mass, dtype=J.dtype)
        if mass.shape != ():
            raise ValueError(f"`mass` must be a scalar, got shape {mass.shape}")
        if potential is not None and not isinstance(potential, AbstractPotential):
            raise TypeError(
                f"`potential` must be an AbstractPotential (e.g. StVenantKirchhoff) or None, "
                f"got {type(potential).__name__}"
            )
        self.J = eqx.error_if(
            J, _spd_violation(J), "`J` must be symmetric positive definite (the inertia tensor)"
        )
        self.g = eqx.error_if(
            g, _spd_violation(g), "`g` (spatial metric) must be symmetric positive definite"
        )
        self.eta = eqx.error_if(
            eta, _spd_violation(eta), "`eta` (material metric) must be symmetric positive definite"
        )
        self.mass = eqx.error_if(mass, ~(mass > 0), "`mass` must be positive")
        self.potential = potential
        self.n = n

    @property
    def dof(self) -> int:
        """Number of generalized coordinates, $n + n^2$."""
        return self.n + self.n * self.n


def split(
    body: AffineBody, q: Float[Array, " d"]
) -> tuple[Float[Array, " n"], Float[Array, "n n"]]:
    """`(r, phi)` from generalized coordinates (or velocities) `q` of shape `(n + n^2,)`.

    **Example:** `r, phi = split(body, q)`.
    """
    n = body.n
    if q.shape[-1:] != (body.dof,):
        raise ValueError(
            f"affine body in dimension n={n} has n + n^2 = {body.dof} coordinates (r, phi); "
            f"got an array of shape {q.shape}"
        )
    return q[..., :n], q[..., n:].reshape(q.shape[:-1] + (n, n))


def join(r: Float[Array, " n"], phi: Float[Array, "n n"]) -> Float[Array, " d"]:
    """Generalized coordinates `concat([r, phi.ravel()])` (inverse of `split`)."""
    r = jnp.asarray(r)
    phi = jnp.asarray(phi)
    n = r.shape[-1]
    if phi.shape[-2:] != (n, n):
        raise ValueError(f"`phi` must have shape (n, n) = ({n}, {n}) to match `r`, got {phi.shape}")
    return jnp.concatenate([r, phi.reshape(phi.shape[:-2] + (n * n,))], axis=-1)


def affine_state(
    body: AffineBody,
    r: Float[ArrayLike, " n"],
    phi: Float[ArrayLike, "n n"],
    r_dot: Float[ArrayLike, " n"],
    phi_dot: Float[ArrayLike, "n n"],
) -> tuple[Float[Array, " d"], Float[Array, " d"]]:
    r"""Initial state `(q, qd)` from $(r,\varphi,\dot r,\dot\varphi)$, checking $\det\varphi>0$.

    An affine configuration needs $\det\varphi > 0$ (Sławianowski et al. 2013: $\varphi\in GL(n)$
    connected to the reference); a singular $\varphi$ or one with negative determinant raises
    (`eqx.error_if`, also under jit).

    **Example:** `q0, qd0 = affine_state(body, jnp.zeros(3), jnp.eye(3), v0, W0)`.
    """
    n = body.n
    arrs = [jnp.asarray(x, dtype=body.J.dtype) for x in (r, phi, r_dot, phi_dot)]
    for name, x, shape in zip(
        ("r", "phi", "r_dot", "phi_dot"), arrs, [(n,), (n, n)] * 2, strict=True
    ):
        if x.shape != shape:
            raise ValueError(f"`{name}` must have shape {shape} for n={n}, got {x.shape}")
    r, phi, r_dot, phi_dot = arrs
    det = jnp.linalg.det(phi)
    scale = jnp.max(jnp.abs(phi)) ** n
    phi = eqx.error_if(
        phi,
        ~(jnp.abs(det) > 1e-12 * scale),
        "`phi` is singular at the start (det phi = 0): an affine configuration must be invertible",
    )
    phi = eqx.error_if(
        phi,
        det < 0,
        "`phi` has negative determinant at the start: an affine configuration must have "
        "det phi > 0",
    )
    return join(r, phi), join(r_dot, phi_dot)


def kinetic_energy(body: AffineBody, qd: Float[Array, " d"]) -> Float[Array, ""]:
    r"""Kinetic energy (Sławianowski et al. 2013)
    $T = \frac M2 g_{ij}\dot r^i\dot r^j + \frac12 g_{ij}\dot\varphi^i{}_K\dot\varphi^j{}_L J^{KL}$.

    **Example:** `kinetic_energy(body, qd)`.
    """
    rd, phid = split(body, qd)
    return 0.5 * body.mass * rd @ body.g @ rd + 0.5 * jnp.trace(body.g @ phid @ body.J @ phid.T)


def potential_energy(body: AffineBody, q: Float[Array, " d"]) -> Float[Array, ""]:
    """$V(r, \\varphi)$ (zero without a potential).

    **Example:** `potential_energy(body, q)`.
    """
    if body.potential is None:
        return jnp.zeros((), dtype=q.dtype)
    r, phi = split(body, q)
    return body.potential(r, phi, body.g, body.eta)


def affine_lagrangian(t, q: Float[Array, " d"], qd: Float[Array, " d"], body: AffineBody):
    r"""$L = T - V$ of an affine body, with signature `L(t, q, qd, p)`, `p` the body.

    **Example:** `cx.System(lagrangian=affine_lagrangian)`.
    """
    if not isinstance(body, AffineBody):
        raise TypeError(
            f"the affine-body Lagrangian needs p = an AffineBody, got {type(body).__name__}"
        )
    return kinetic_energy(body, qd) - potential_energy(body, q)


def affine_system(*constraints, force=None) -> System:
    r"""A `cx.System` for an affine body: `affine_lagrangian` plus the given constraints.

    Simulate it with `p = body` (an `AffineBody`). Any constraint of the core engine may
    be passed, in particular `gyroscopic()`, `isochoric(...)`, `conformal()`,
    `rotation_free()`.

    **Example:** `cx.simulate(affine_system(isochoric(1.0)), q0, qd0, body, t1=1.0)`.
    """
    return System(lagrangian=affine_lagrangian, constraints=constraints, force=force)

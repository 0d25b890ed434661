r"""Potentials of an affine body: general $V(r, \varphi)$ and hyperelastic $V(G)$.

Sławianowski et al. 2013 ($L = T - V(r, \varphi)$; hyperelastic $V$ depending only on the
Green deformation tensor $G_{AB} = g_{ij}\varphi^i{}_A\varphi^j{}_B$).
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


def green_tensor(phi: Float[Array, "n n"], g: Float[Array, "n n"]) -> Float[Array, "n n"]:
    r"""Green deformation tensor $G = \varphi^\top g\,\varphi$ (Sławianowski et al. 2013).

    **Example:** `green_tensor(phi, jnp.eye(3))`.
    """
    return phi.T @ g @ phi


class AbstractPotential(eqx.Module):
    """A potential energy $V(r, \\varphi)$ of an affine body, evaluated with the metrics."""

    @abc.abstractmethod
    def __call__(
        self,
        r: Float[Array, " n"],
        phi: Float[Array, "n n"],
        g: Float[Array, "n n"],
        eta: Float[Array, "n n"],
    ) -> Float[Array, ""]:
        """$V(r, \\varphi)$ given the spatial metric `g` and material metric `eta`."""


class AbstractHyperelastic(AbstractPotential):
    r"""A hyperelastic potential $V(G)$, $G = \varphi^\top g\varphi$.

    Such a $V$ is invariant under spatial rotations $\varphi\mapsto R\varphi$
    ($R^\top gR = g$), so its dipole $N$ is $g$-symmetric and the spin is conserved.
    """

    @abc.abstractmethod
    def energy(self, G: Float[Array, "n n"], eta: Float[Array, "n n"]) -> Float[Array, ""]:
        """$V$ as a function of the Green tensor `G` and the material metric `eta`."""

    def __call__(self, r, phi, g, eta):
        return self.energy(green_tensor(phi, g), eta)


class StVenantKirchhoff(AbstractHyperelastic):
    r"""St Venant–Kirchhoff energy $V = \mathrm{vol}\,\big(\tfrac{\lambda}{2}(\operatorname{tr}E)^2
    + \mu\operatorname{tr}E^2\big)$ with $E = \tfrac12(\eta^{-1}G - 1)$.

    Hyperelastic $V(G)$ of Sławianowski et al. 2013, the simplest isotropic
    law; traces are taken with the material metric $\eta$.

    **Arguments:**

    - `lam`, `mu`: Lamé moduli (arrays: differentiable).
    - `volume`: reference volume (default 1).

    **Example:** `StVenantKirchhoff(lam=1.0, mu=0.5)`.
    """

    lam: Float[Array, ""]
    mu: Float[Array, ""]
    volume: Float[Array, ""]

    def __init__(self, lam: Float[ArrayLike, ""], mu: Float[ArrayLike, ""], volume=1.0):
        self.lam = jnp.asarray(lam, dtype=float)
        self.mu = jnp.asarray(mu, dtype=float)
        self.volume = jnp.asarray(volume, dtype=float)

    def energy(self, G, eta):
        n = G.shape[0]
        E = 0.5 * (jnp.linalg.solve(eta, G) - jnp.eye(n, dtype=G.dtype))
        trE = jnp.trace(E)
        return self.volume * (0.5 * self.lam * trE**2 + self.mu * jnp.trace(E @ E))


class Hyperelastic(AbstractHyperelastic):
    r"""A user hyperelastic law `fn(G, eta) -> scalar`, $V = V(G)$ (Sławianowski et al. 2013).

    **Example:** `Hyperelastic(lambda G, eta: 0.5 * jnp.trace(G))`.
    """

    fn: Callable

    def energy(self, G, eta):
        return self.fn(G, eta)


class Potential(AbstractPotential):
    r"""A general potential `fn(r, phi) -> scalar`, $V(r, \varphi)$ (Sławianowski et al. 2013).

    Not necessarily rotation invariant: its dipole $N$ need not be symmetric.

    **Example:** `Potential(lambda r, phi: 0.5 * r @ r + phi[0, 0])`.
    """

    fn: Callable

    def __call__(self, r, phi, g, eta):
        return self.fn(r, phi)

r"""Parameter transforms: fit positive or bounded parameters in an unconstrained space.

An optimiser works on $u \in \mathbb{R}$; the model sees $\theta = \tau(u)$. `Positive`
($\theta = e^u$) keeps masses and inertias positive and makes steps relative, which
also conditions parameters of very different scales.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PyTree


class AbstractTransform(eqx.Module):
    """A bijection $\\theta = \\tau(u)$ from an unconstrained $u$ to a parameter $\\theta$."""

    @abc.abstractmethod
    def forward(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """$\\theta = \\tau(u)$."""

    @abc.abstractmethod
    def inverse(self, theta: Float[Array, "..."]) -> Float[Array, "..."]:
        """$u = \\tau^{-1}(\\theta)$ (raises under `jit` if $\\theta$ is outside the range)."""


class Identity(AbstractTransform):
    """$\\theta = u$ (the default for every parameter).

    **Example:** `cx.fit.Identity().forward(jnp.array(2.0))  # 2.0`
    """

    def forward(self, u):
        return u

    def inverse(self, theta):
        return theta


class Positive(AbstractTransform):
    r"""$\theta = e^u$: strictly positive parameters (masses, inertias, lengths).

    **Example:** `cx.fit.Positive().inverse(jnp.array(2.0))  # log 2`
    """

    def forward(self, u):
        return jnp.exp(u)

    def inverse(self, theta):
        theta = eqx.error_if(
            theta, jnp.any(theta <= 0), "cx.fit.Positive: a parameter is <= 0, expected > 0"
        )
        return jnp.log(theta)


class Bounded(AbstractTransform):
    r"""$\theta = a + (b - a)\,\sigma(u)$ with the logistic $\sigma$: $a < \theta < b$.

    **Arguments:** `lower`, `upper`: the bounds $a < b$.

    **Example:** `cx.fit.Bounded(0.0, 1.0)` for a friction coefficient.
    """

    lower: Float[ArrayLike, ""]
    upper: Float[ArrayLike, ""]

    def __check_init__(self):
        try:
            ok = bool(jnp.all(jnp.asarray(self.lower) < jnp.asarray(self.upper)))
        except jax.errors.ConcretizationTypeError:
            return
        if not ok:
            raise ValueError(
                f"cx.fit.Bounded: expected lower < upper, got lower={self.lower}, "
                f"upper={self.upper}"
            )

    def forward(self, u):
        return self.lower + (self.upper - self.lower) * jax.nn.sigmoid(u)

    def inverse(self, theta):
        s = (theta - self.lower) / (self.upper - self.lower)
        s = eqx.error_if(
            s, jnp.any((s <= 0) | (s >= 1)), "cx.fit.Bounded: a parameter is outside (lower, upper)"
        )
        return jnp.log(s) - jnp.log1p(-s)


def _is_transform(x) -> bool:
    return isinstance(x, AbstractTransform)


def _map(method: str, transforms: PyTree, tree: PyTree, name: str) -> PyTree:
    if transforms is None:
        return tree
    try:  # the structure alone: errors of the transforms themselves pass through
        jax.tree.map(lambda tr, sub: None, transforms, tree, is_leaf=_is_transform)
    except ValueError as e:
        raise ValueError(
            f"`transforms` must be a pytree prefix of the fitted parameters {name} with an "
            f"AbstractTransform at each leaf, got transforms structure "
            f"{jax.tree.structure(transforms, is_leaf=_is_transform)} and parameters "
            f"structure {jax.tree.structure(tree)}"
        ) from e
    return jax.tree.map(
        lambda tr, sub: jax.tree.map(getattr(tr, method), sub),
        transforms,
        tree,
        is_leaf=_is_transform,
    )


def constrain(transforms: PyTree, u: PyTree) -> PyTree:
    """Map unconstrained values `u` to parameters: `tau(u)` leaf by leaf.

    **Arguments:** `transforms`, a pytree prefix of `u` whose leaves are transforms (or
    `None`: identity everywhere); `u`, the unconstrained values.

    **Returns:** the parameters, with the structure of `u`.

    **Example:** `constrain({"m": Positive()}, {"m": jnp.log(2.0)})  # {"m": 2.0}`
    """
    return _map("forward", transforms, u, "")


def unconstrain(transforms: PyTree, theta: PyTree) -> PyTree:
    """The inverse of `constrain`: unconstrained values of the parameters `theta`.

    **Example:** `unconstrain({"m": Positive()}, {"m": 2.0})  # {"m": log 2}`
    """
    return _map("inverse", transforms, theta, "")

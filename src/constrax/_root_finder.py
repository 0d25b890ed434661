r"""A bracketing root finder with superlinear convergence: Chandrupatla's method
(docs page "Rolling or sliding", "Switching").

`diffrax.Event` locates an event by a root find on the step's dense output, given the
step as a bracket `[lower, upper]` whose ends have opposite signs. Bisection halves the
bracket at every evaluation: from a step of 0.4 s to $10^{-10}$, 32 evaluations of the
event function, which in `cx.rigid.simulate_contacts` is the whole dynamics (a saddle
solve) at the interpolated state. Newton's method needs the function's derivative traced
into the forward run and stalls on a kink (the event function of a contact run is a
minimum over the contacts' conditions).

Chandrupatla's method (T. R. Chandrupatla, "A new hybrid quadratic/bisection algorithm for
finding the zero of a nonlinear function without using derivatives", Advances in
Engineering Software 28, 1997) keeps a bracket $[a, b]$ and the point $c$ it last
discarded. From the three it takes the inverse quadratic interpolation's root where the
three points are consistent with a monotone function between them,

$$
\xi = \frac{a - b}{c - b}, \quad \varphi = \frac{f_a - f_b}{f_c - f_b}, \quad
1 - \sqrt{1 - \xi} < \varphi < \sqrt{\xi},
$$

and the bracket's midpoint otherwise, each new point kept at least half the tolerance
inside the bracket. It needs no derivative, converges superlinearly where the function is
smooth and, at worst, as bisection does, so a kink cannot stall it: the event of a
bouncing ball is located in 9 to 11 evaluations, the two ends of the bracket included,
instead of 32 to 35.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Bool, Int, Scalar


class _ChandrupatlaState(eqx.Module):
    point: Scalar  # where the next step evaluates the function
    a: Scalar  # the newest point: [a, b] brackets the root
    b: Scalar
    c: Scalar  # the point the last step dropped from the bracket
    fa: Scalar
    fb: Scalar
    fc: Scalar
    best: Scalar  # the end of the bracket with the smaller |f|
    count: Int[Array, ""]  # the evaluations so far (0: lower next, 1: upper next)
    done: Bool[Array, ""]
    bracketed: Bool[Array, ""]
    finite: Bool[Array, ""]


class Chandrupatla(optx.AbstractRootFinder):
    r"""Chandrupatla's bracketing root finder for functions $\mathbb{R} \to \mathbb{R}$:
    inverse quadratic interpolation where it is safe, bisection otherwise (module
    docstring; Chandrupatla 1997).

    Requires `options=dict(lower=..., upper=...)`, a bracket whose ends have function
    values of opposite signs (or a zero), as `optimistix.Bisection` does and as
    `diffrax.Event` passes it. It evaluates both ends first and takes the secant's root
    next, so the `y0` of `optimistix.root_find` is not used. It stops when the bracket is
    narrower than `atol + rtol * |x|` (Chandrupatla's test; `optimistix.Bisection` also
    asks $|f| <$ `atol`, which a function that jumps through zero never meets), or at an
    exact zero, and returns the end of the bracket with the smaller $|f|$. A bracket whose
    ends have the same sign is reported as a failed solve
    (`optimistix.RESULTS.nonlinear_divergence`), not as a root, and a non-finite value of
    the function as `optimistix.RESULTS.nonfinite`.

    **Arguments:**

    - `rtol`, `atol`: the tolerances on the bracket's width, in the argument's units.
    """

    rtol: float
    atol: float
    norm: ClassVar[Callable] = jnp.abs

    def init(self, fn, y, args, options, f_struct, aux_struct, tags) -> _ChandrupatlaState:
        del fn, args, aux_struct, tags
        if jnp.shape(y) != () or f_struct.shape != ():
            raise ValueError(
                "Chandrupatla finds the roots of a function from a scalar to a scalar; got "
                f"an argument of shape {jnp.shape(y)} and a value of shape {f_struct.shape}"
            )
        if "lower" not in options or "upper" not in options:
            raise ValueError("Chandrupatla needs a bracket: `options=dict(lower=..., upper=...)`")
        dtype = jnp.result_type(y)
        lower = jnp.asarray(options["lower"], dtype)
        zero = jnp.zeros((), f_struct.dtype)
        false = jnp.asarray(False)
        return _ChandrupatlaState(
            point=lower, a=lower, b=lower, c=lower, fa=zero, fb=zero, fc=zero,
            best=lower, count=jnp.asarray(0), done=false, bracketed=jnp.asarray(True),
            finite=jnp.asarray(True),
        )  # fmt: skip

    def step(self, fn, y, args, options, state, tags):
        del y, tags
        s = state
        x = s.point
        fx, aux = fn(x, args)
        upper = jnp.asarray(options["upper"], x.dtype)
        at_lower, at_upper = s.count == 0, s.count == 1
        # The bracket [a, b], a the point just evaluated; c the point it displaced.
        keep_b = jnp.sign(fx) == jnp.sign(s.fa)
        c = jnp.where(keep_b, s.a, s.b)
        fc = jnp.where(keep_b, s.fa, s.fb)
        b = jnp.where(at_lower, x, jnp.where(at_upper | keep_b, s.b, s.a))
        fb = jnp.where(at_lower, fx, jnp.where(at_upper | keep_b, s.fb, s.fa))
        a, fa = x, fx
        bracketed = s.bracketed & ~(at_upper & (jnp.sign(fa) * jnp.sign(fb) > 0))
        finite = s.finite & jnp.isfinite(fx)
        smaller = jnp.abs(fa) < jnp.abs(fb)
        best = jnp.where(smaller, a, b)
        f_best = jnp.where(smaller, fa, fb)
        tol = self.atol + self.rtol * jnp.abs(best)
        width = jnp.abs(b - a)
        converged = width < tol
        done = (f_best == 0) | ~finite | (~at_lower & (converged | ~bracketed))
        # The next point a + t (b - a): the secant's root after the two ends, then the
        # inverse quadratic interpolation's where it is safe, else the midpoint; at least
        # half the tolerance inside the bracket.
        xi = (a - b) / (c - b)
        phi = (fa - fb) / (fc - fb)
        safe = (1 - jnp.sqrt(1 - xi) < phi) & (phi < jnp.sqrt(xi))
        alpha = (c - a) / (b - a)
        t_quadratic = fa / (fa - fb) * fc / (fc - fb) - alpha * fa / (fc - fa) * fb / (fb - fc)
        t = jnp.where(at_upper, fa / (fa - fb), jnp.where(safe, t_quadratic, 0.5))
        t = jnp.where(jnp.isfinite(t), t, 0.5)
        t_min = jnp.minimum(0.5 * tol / width, 0.5)
        t = jnp.clip(t, t_min, 1 - t_min)
        point = jnp.where(at_lower, upper, jnp.where(done, best, a + t * (b - a)))
        new = _ChandrupatlaState(
            point=point, a=a, b=b, c=c, fa=fa, fb=fb, fc=fc, best=best,
            count=s.count + 1, done=done, bracketed=bracketed, finite=finite,
        )  # fmt: skip
        return point, new, aux

    def terminate(self, fn, y, args, options, state, tags):
        del fn, y, args, options, tags
        result = optx.RESULTS.where(
            state.bracketed, optx.RESULTS.successful, optx.RESULTS.nonlinear_divergence
        )
        result = optx.RESULTS.where(state.finite, result, optx.RESULTS.nonfinite)
        return state.done, result

    def postprocess(self, fn, y, aux, args, options, state, tags, result) -> tuple[Any, Any, dict]:
        del fn, y, args, options, tags, result
        return state.best, aux, {}

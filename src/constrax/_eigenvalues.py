r"""Eigenvalues of steady motions: the spectrum of a linearisation on the constraint
manifold, each eigenvalue with its condition number (docs/concepts/linearisation.md).

$A = T^\top F T$ from `linearise`; its eigenvalues $\lambda_i$ with unit right and left
eigenvectors $x_i$, $y_i$, and Wilkinson's condition number of a simple eigenvalue
$\kappa_i = 1/|y_i^H x_i|$: rounding of size $\epsilon|A|$ moves $\lambda_i$ by about
$\kappa_i\epsilon|A|$. Above a threshold ($\epsilon^{-1/3}$ by default) an
`IllConditionedWarning` says so (J. H. Wilkinson, *The Algebraic Eigenvalue Problem*, 1965).
"""

import warnings

import equinox as eqx
import numpy as np
import scipy.linalg

from ._linearise import Linearisation


class IllConditionedWarning(UserWarning):
    r"""An eigenvalue of a linearisation is ill-conditioned: its condition number
    $\kappa_i = 1/|y_i^H x_i|$ (unit right and left eigenvectors) is above the threshold of
    `eigenvalues`, so that rounding of size $\epsilon|A|$ moves it by about
    $\kappa_i\epsilon|A|$ — or, for a defective (Jordan) block, by $(\epsilon|A|)^{1/p}$.

    **Example:**

    ```python
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", cx.IllConditionedWarning)  # make it an error here
        cx.eigenvalues(jnp.array([[-1.0, 0.0], [0.0, -2.0]]))    # well-conditioned: fine
    ```
    """


class Eigenvalues(eqx.Module):
    r"""Output of `eigenvalues`: the spectrum of the reduced $A$ with condition numbers.

    - `values`: eigenvalues $\lambda_i$, shape `(k,)` (complex), sorted by real part,
      largest first.
    - `vectors`: unit right eigenvectors in reduced coordinates, columns, `(k, k)`.
    - `state_vectors`: the same in state coordinates, $T x_i$, `(d, k)`.
    - `conditions`: $\kappa_i = 1/|y_i^H x_i|$ with $x_i$, $y_i$ unit right and left
      eigenvectors (Wilkinson's condition number of a simple eigenvalue; $\infty$ or very
      large in a Jordan block), `(k,)`.
    - `condition`: $\kappa_2(V)$, the condition number of the eigenvector matrix (the
      Bauer–Fike constant).
    - `threshold`: the cutoff the warning used; `ill_conditioned`: `conditions > threshold`.
    """

    values: np.ndarray
    vectors: np.ndarray
    state_vectors: np.ndarray
    conditions: np.ndarray
    condition: float
    threshold: float
    ill_conditioned: np.ndarray

    @property
    def max_real(self) -> float:
        r"""$\max_i \operatorname{Re}\lambda_i$: negative for asymptotic stability."""
        return float(np.max(self.values.real)) if self.values.size else -np.inf


def default_condition_threshold(dtype) -> float:
    r"""$\epsilon^{-1/3}$ of the dtype: $1.7\times10^5$ in float64, $203$ in float32.

    An eigenvalue with $\kappa_i\epsilon|A|$ error keeps two thirds of its digits below
    this; a perturbed Jordan block of size 2 has $\kappa\approx\epsilon^{-1/2}$ and is
    flagged.
    """
    return float(np.finfo(dtype).eps) ** (-1.0 / 3.0)


def eigenvalues(
    linearisation: Linearisation,
    *,
    threshold: float | None = None,
    warn: bool = True,
) -> Eigenvalues:
    r"""Eigenvalues of the reduced linearisation $A = T^\top FT$ (steady-motion stability),
    with condition numbers; warns where the eigenvalue problem is ill-conditioned.

    A steady motion is linearly (asymptotically) stable when every $\operatorname{Re}
    \lambda_i < 0$, unstable when one is positive; purely imaginary pairs are the neutral
    oscillations of conservative and nonholonomic systems (rolling disks), zeros the
    families of steady motions (speed, heading). The condition number of each eigenvalue,
    $\kappa_i = 1/|y_i^H x_i|$ (unit right/left eigenvectors), bounds its sensitivity:
    a perturbation $E$ of $A$ moves it by about $\kappa_i|E|$ (Wilkinson, *The Algebraic
    Eigenvalue Problem*, 1965). Eigenvalues in a Jordan block (a defective $A$: a cyclic
    coordinate left in the state, a free particle) have $\kappa_i = \infty$ in exact
    arithmetic; computed in floating point they split by $\sim(\epsilon|A|)^{1/p}$ and their
    imaginary parts and signs of real parts are not to be trusted.

    Runs eagerly on the host (NumPy/SciPy LAPACK `geev`), not under `jit`.

    **Arguments:**

    - `linearisation`: a `Linearisation` (from `linearise`), or a square array `A`.
    - `threshold`: $\kappa_i$ above which an `IllConditionedWarning` is emitted (default
      $\epsilon^{-1/3}$ of the dtype: $1.7\times10^5$ in float64).
    - `warn`: `False` to skip the warning (read `ill_conditioned` instead).

    **Returns:** an `Eigenvalues`.

    **Example:**

    ```python
    lin = cx.linearise(system, 0.0, q, jnp.array([1.0, 0.0, 0.0]), p, cyclic=(0, 1))
    ev = cx.eigenvalues(lin)   # 0, 0 and -m a v / (I + m a^2): stable moving forward
    ev.values, ev.conditions
    ```
    """
    if isinstance(linearisation, Linearisation):
        A, T = np.asarray(linearisation.A), np.asarray(linearisation.T)
    else:
        A = np.asarray(linearisation)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(
                f"`linearisation` must be a cx.Linearisation or a square matrix, got shape "
                f"{A.shape}"
            )
        T = np.eye(A.shape[0], dtype=A.dtype)
    if not np.all(np.isfinite(A)):
        raise ValueError("constrax.eigenvalues: the reduced matrix A contains NaN or inf")
    dtype = A.dtype if np.issubdtype(A.dtype, np.floating) else np.float64
    threshold = default_condition_threshold(dtype) if threshold is None else float(threshold)
    k = A.shape[0]
    if k == 0:
        empty = np.zeros((0,), complex)
        return Eigenvalues(
            empty, np.zeros((0, 0), complex), np.zeros((T.shape[0], 0), complex),
            np.zeros((0,)), 1.0, threshold, np.zeros((0,), bool),
        )  # fmt: skip
    w, vl, vr = scipy.linalg.eig(A, left=True, right=True)
    order = np.lexsort((w.imag, -w.real))
    w, vl, vr = w[order], vl[:, order], vr[:, order]
    vr = vr / np.linalg.norm(vr, axis=0)
    vl = vl / np.linalg.norm(vl, axis=0)
    overlap = np.abs(np.sum(vl.conj() * vr, axis=0))
    with np.errstate(divide="ignore"):
        conditions = np.where(overlap > 0, 1.0 / np.maximum(overlap, np.finfo(float).tiny), np.inf)
    sv = np.linalg.svd(vr, compute_uv=False)
    condition = float(sv[0] / sv[-1]) if sv[-1] > 0 else np.inf
    bad = conditions > threshold
    if warn and bad.any():
        listed = ", ".join(
            f"{v:.6g} (cond {c:.2g})" for v, c in zip(w[bad], conditions[bad], strict=True)
        )
        warnings.warn(
            f"constrax.eigenvalues: the eigenvalue problem is ill-conditioned: eigenvalues "
            f"{listed} have condition numbers above threshold={threshold:.3g} (eigenvector "
            f"matrix condition {condition:.3g}). They are nearly defective (a Jordan block): "
            f"rounding moves them by far more than machine precision, and their imaginary "
            f"parts and the signs of their real parts are unreliable. A neutral direction "
            f"such as the position of a cyclic coordinate makes zero eigenvalues defective: "
            f"mark it with `cyclic=` in cx.linearise.",
            IllConditionedWarning,
            stacklevel=2,
        )
    return Eigenvalues(
        values=w,
        vectors=vr,
        state_vectors=T @ vr,
        conditions=conditions,
        condition=condition,
        threshold=threshold,
        ill_conditioned=bad,
    )

r"""`solve`: minimise $J(z) = \tfrac12|r(z)|^2$ of a fit problem with an optimistix
least-squares solver (Gauss–Newton / Levenberg–Marquardt) or any optax optimiser.

The optax path is a Python loop over one jitted step with a progress bar (tqdm,
optional), early stopping, and checkpoint/resume: the loop state (decision variables,
optimiser state, best iterate, loss history) is written with
`eqx.tree_serialise_leaves` behind a fingerprint of the problem, and is also written
when the loop is interrupted (an exception or Ctrl-C), so resuming loses nothing and
reproduces the uninterrupted run bit for bit.
"""

import math
import os
import warnings
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float, PyTree

from .._custom_types import Params
from ._checkpoint import fingerprint, load_checkpoint, save_checkpoint
from ._problem import AbstractProblem

try:  # optional (`pip install constrax[fit]`): only the gradient-descent path needs it
    import optax
except ImportError:  # pragma: no cover
    optax = None


class EarlyStopping(eqx.Module):
    """Stop the optax loop when the loss stalls or reaches a target.

    An iterate improves on the best loss $J^*$ if $J < J^* - (\\text{atol} +
    \\text{rtol}\\,|J^*|)$; the loop stops after `patience` steps without improvement,
    or as soon as $J \\le$ `target`.

    **Example:** `cx.fit.EarlyStopping(patience=20, rtol=1e-6, target=1e-12)`
    """

    patience: int = 10
    rtol: float = 0.0
    atol: float = 0.0
    target: float | None = None


class FitResult(eqx.Module):
    """What `solve` returns.

    - `params`: the full parameter pytree at the solution (the best iterate for optax).
    - `z`: the decision variables (unconstrained parameters, shooting nodes, knots).
    - `loss`: $J$ at `z`.
    - `num_steps`: optimiser steps taken.
    - `losses`: the loss history `(num_steps,)` (optax path; `None` for optimistix).
    - `stopped_early`: whether `EarlyStopping` ended the loop.
    - `result`: the `optimistix.RESULTS` of a least-squares solve (`None` for optax).
    """

    params: Params
    z: PyTree[Array]
    loss: Float[Array, ""]
    num_steps: int
    losses: np.ndarray | None
    stopped_early: bool
    result: optx.RESULTS | None


def _nonfinite_paths(tree) -> list[str]:
    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not eqx.is_array_like(leaf):
            continue
        a = np.asarray(leaf)
        if np.issubdtype(a.dtype, np.inexact) and not np.all(np.isfinite(a)):
            bad.append(jax.tree_util.keystr(path) or "(the whole value)")
    return bad


def _check_finite_start(problem, z0) -> None:
    """`ValueError` naming the leaves of `init` that the fit starts from and that hold NaN
    or inf (found in the parameter pytree rebuilt from the decision variables)."""
    if not _nonfinite_paths(z0):
        return
    bad = _nonfinite_paths(problem.params_of(z0)) or _nonfinite_paths(z0)
    raise ValueError(
        f"constrax.fit.solve: `init` holds non-finite values at {', '.join(bad)}, which the "
        "fit starts from; give finite starting parameters"
    )


def _result_message(result) -> str:
    for name in ("nonlinear_max_steps_reached", "max_steps_reached"):
        if hasattr(optx.RESULTS, name) and result == getattr(optx.RESULTS, name):
            return "the step limit was reached"
    return "optimistix result: " + str(optx.RESULTS[result]).strip()


def _jac_mode(problem) -> str:
    adjoint = getattr(problem, "adjoint", None)
    return "fwd" if isinstance(adjoint, diffrax.ForwardMode) else "bwd"


def _unconverged_advice(problem) -> str:
    """What the error of a least-squares run that did not converge advises. With adaptive
    steps and `RecursiveCheckpointAdjoint`, the Jacobians are right only if the backward pass
    recomputes the forward pass's steps exactly (docs/concepts/gradients.md, "Adaptive
    steps and the recomputation")."""
    advice = "Raise `steps`, check the starting parameters and the observations"
    controller = getattr(problem, "stepsize_controller", None)
    if (
        controller is not None
        and not isinstance(controller, diffrax.ConstantStepSize)
        and isinstance(getattr(problem, "adjoint", None), diffrax.RecursiveCheckpointAdjoint)
    ):
        advice += (
            "; with adaptive steps, reverse-mode Jacobians are right only if the backward "
            "pass recomputes the forward steps exactly, which not every compiler setting does "
            "(docs/concepts/gradients.md): fixed steps (`dt0` with "
            "diffrax.ConstantStepSize()) or adjoint=diffrax.ForwardMode() do not depend on it"
        )
    return advice + ", or pass throw=False to get the FitResult"


@eqx.filter_jit
def _least_squares(problem, z0, solver, max_steps, throw):
    sol = optx.least_squares(
        lambda z, _: problem.residuals(z),
        solver,
        z0,
        options=dict(jac=_jac_mode(problem)),
        max_steps=max_steps,
        throw=throw,
    )
    return sol.value, problem.loss(sol.value), sol.stats["num_steps"], sol.result


@eqx.filter_jit
def _optax_step(problem, optimiser, z, opt_state):
    if _jac_mode(problem) == "fwd":  # diffrax.ForwardMode: gradient by forward mode
        loss, grads = problem.loss(z), jax.jacfwd(problem.loss)(z)
    else:
        loss, grads = eqx.filter_value_and_grad(problem.loss)(z)
    updates, opt_state = optimiser.update(grads, opt_state, z)
    return loss, optax.apply_updates(z, updates), opt_state


def _progress(enabled: bool, total: int, initial: int):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional
        warnings.warn(
            "progress=True needs tqdm (pip install tqdm); continuing without a bar", stacklevel=3
        )
        return None
    return tqdm(total=total, initial=initial, desc="constrax.fit", leave=False)


def solve(
    problem: AbstractProblem,
    init: Params,
    optimiser: "optax.GradientTransformation | optx.AbstractLeastSquaresSolver | None" = None,
    *,
    steps: int = 256,
    early_stopping: EarlyStopping | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 50,
    resume: bool = True,
    progress: bool = False,
    callback: Callable[[int, float, Params], None] | None = None,
    throw: bool = True,
    **init_kwargs,
) -> FitResult:
    r"""Minimise $J(z) = \tfrac12|r(z)|^2$ of `problem` starting from the parameters `init`.

    **Arguments:**

    - `problem`: an `IdentificationProblem` or `TrajectoryProblem`.
    - `init`: a starting parameter pytree with the structure, shapes and dtypes of
      `problem.params` (only the fitted leaves are read).
    - `optimiser`: an `optimistix` least-squares solver (default
      `optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)`: Gauss–Newton steps on the
      residuals, fast and exact convergence), or any `optax` gradient transformation
      (then $J$ is minimised by its gradient, through diffrax with the problem's
      adjoint).
    - `steps`: maximum optimiser steps.
    - `early_stopping`, `checkpoint`, `checkpoint_every`, `resume`, `progress`,
      `callback(step, loss, params)`: optax path only. With `checkpoint` a path, the
      loop state is saved every `checkpoint_every` steps, at the end and on
      interruption, and (with `resume=True`) an existing checkpoint is resumed. A
      checkpoint written for another problem, of another format version, or failing its
      sha256 checksum (damaged or truncated) is refused with a `ValueError`.
    - `throw`: raise if an optimistix solve fails (otherwise see `result`).
    - `init_kwargs`: passed to `problem.init` (e.g. `nodes=` for multiple shooting).

    **Returns:** a `FitResult`.

    **Example:**

    ```python
    res = cx.fit.solve(problem, guess)                              # Levenberg–Marquardt
    res = cx.fit.solve(problem, guess, optax.adam(1e-2), steps=500,
                       checkpoint="fit.ckpt", progress=True)        # resumable
    res.params
    ```
    """
    problem.check_params(init)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be a positive int, got {steps!r}")
    init = jax.tree.map(lambda x: jnp.asarray(x) if isinstance(x, float) else x, init)
    z0 = problem.init(init, **init_kwargs)
    _check_finite_start(problem, z0)
    if optimiser is None:
        optimiser = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    if isinstance(optimiser, optx.AbstractLeastSquaresSolver):
        z, loss, n, result = _least_squares(problem, z0, optimiser, steps, False)
        if throw and result != optx.RESULTS.successful:
            raise RuntimeError(
                f"constrax.fit.solve: {type(optimiser).__name__} stopped after {int(n)} of "
                f"`steps`={steps} steps without converging ({_result_message(result)}); "
                f"the loss is {float(loss):.6g}. {_unconverged_advice(problem)}"
            )
        return FitResult(problem.params_of(z), z, loss, int(n), None, False, result)
    if optax is None or not isinstance(optimiser, optax.GradientTransformation):
        raise TypeError(
            "`optimiser` must be an optimistix least-squares solver or an optax "
            f"GradientTransformation (optax installed: {optax is not None}), got "
            f"{type(optimiser).__name__}"
        )
    if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise ValueError(f"`checkpoint_every` must be a positive int, got {checkpoint_every!r}")
    state = (z0, optimiser.init(z0), z0)
    fp = fingerprint(state, problem.config())
    meta = {"step": 0, "losses": [], "best_loss": math.inf, "stall": 0, "stopped": False}
    if checkpoint is not None and resume and os.path.exists(checkpoint):
        state, meta = load_checkpoint(checkpoint, state, fp)
    z, opt_state, best_z = state
    losses = list(meta["losses"])
    best_loss, stall, stopped = meta["best_loss"], meta["stall"], meta["stopped"]
    step = meta["step"]
    bar = _progress(progress, steps, step)

    def save():
        if checkpoint is not None:
            m = dict(step=step, losses=losses, best_loss=best_loss, stall=stall, stopped=stopped)
            save_checkpoint(checkpoint, (z, opt_state, best_z), fp, m)

    try:
        while step < steps and not stopped:
            loss, z_new, opt_state_new = _optax_step(problem, optimiser, z, opt_state)
            loss = float(loss)
            if not math.isfinite(loss):
                raise FloatingPointError(
                    f"constrax.fit.solve: the loss is {loss} at step {step}; lower the "
                    "learning rate or check the starting parameters"
                )
            # `loss` is J at `z` (before the update): book-keep `z`, then move on.
            tol = 0.0
            if early_stopping is not None and math.isfinite(best_loss):
                tol = early_stopping.atol + early_stopping.rtol * abs(best_loss)
            if loss < best_loss - tol or not math.isfinite(best_loss):
                best_loss, best_z, stall = loss, z, 0
            else:
                stall += 1
            losses.append(loss)
            z, opt_state = z_new, opt_state_new
            step += 1
            if early_stopping is not None and (
                stall >= early_stopping.patience
                or (early_stopping.target is not None and loss <= early_stopping.target)
            ):
                stopped = True
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3e}")
            if callback is not None:
                callback(step, loss, problem.params_of(z))
            if step % checkpoint_every == 0:
                save()
    except BaseException:
        save()
        raise
    finally:
        if bar is not None:
            bar.close()
    save()
    if not losses:  # resumed a finished run
        best_loss = float(problem.loss(best_z))
    return FitResult(
        problem.params_of(best_z),
        best_z,
        jnp.asarray(best_loss),
        step,
        np.asarray(losses),
        stopped,
        None,
    )

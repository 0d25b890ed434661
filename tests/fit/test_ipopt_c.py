"""IPOPT's C interface as `cx.fit.IPOPT` drives it (`constrax/fit/_ipopt_c.py`): the values
go through numpy views of IPOPT's memory, so these tests check what such a driver can get
wrong: the optimum of a published problem, every callback's array read and written whole,
an exception in a callback, an evaluation error at a trial point, a refused option, a stop
asked for, a warm start."""

import ctypes.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cyipopt")

from constrax.fit import _ipopt_c  # noqa: E402

# Hock & Schittkowski, "Test Examples for Nonlinear Programming Codes" (1981), problem 71
# (IPOPT's own C example): min x1 x4 (x1 + x2 + x3) + x3 subject to x1 x2 x3 x4 >= 25,
# |x|^2 = 40, 1 <= x <= 5, from (1, 5, 5, 1). Optimum f* = 17.0140173 at
# x* = (1, 4.7429994, 3.8211503, 1.3794082).
X_STAR = np.array([1.0, 4.7429994, 3.8211503, 1.3794082])
F_STAR = 17.0140173
JAC = (np.array([0, 0, 0, 0, 1, 1, 1, 1]), np.array([0, 1, 2, 3, 0, 1, 2, 3]))
HESS = np.tril_indices(4)  # the lower triangle, row by row


class HS071:
    def __init__(self):
        self.iterations = []

    def objective(self, x):
        return x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2]

    def gradient(self, x):
        s = x[0] + x[1] + x[2]
        return np.array([x[3] * (s + x[0]), x[0] * x[3], x[0] * x[3] + 1.0, x[0] * s])

    def constraints(self, x):
        return np.array([np.prod(x), x @ x])

    def jacobian(self, x):
        p = np.prod(x)
        return np.concatenate([p / x, 2 * x])

    def hessian(self, x, lam, sigma):
        H = np.zeros((4, 4))
        H += sigma * np.array(
            [
                [2 * x[3], x[3], x[3], 2 * x[0] + x[1] + x[2]],
                [x[3], 0, 0, x[0]],
                [x[3], 0, 0, x[0]],
                [2 * x[0] + x[1] + x[2], x[0], x[0], 0],
            ]
        )
        P = np.zeros((4, 4))
        for i in range(4):
            for j in range(4):
                if i != j:
                    P[i, j] = np.prod([x[k] for k in range(4) if k not in (i, j)])
        H += lam[0] * P + lam[1] * 2 * np.eye(4)
        return H[HESS]

    def intermediate(self, it, obj, inf_pr):
        self.iterations.append(it)
        return True


def solve(
    callbacks, x0=(1.0, 5.0, 5.0, 1.0), multipliers0=None, library=None, optional=(), **options
):
    return _ipopt_c.solve(
        4,
        np.ones(4),
        5 * np.ones(4),
        2,
        np.array([25.0, 40.0]),
        np.array([2e19, 40.0]),
        JAC,
        HESS,
        callbacks,
        np.array(x0),
        {"print_level": 0, "sb": "yes", "tol": 1e-10, **options},
        multipliers0,
        library,
        optional=frozenset(optional),
    )


def test_hs071_reaches_the_published_optimum():
    problem = HS071()
    x, f, status, lam = solve(problem)
    assert status == 0
    np.testing.assert_allclose(x, X_STAR, atol=1e-6)  # the published digits
    assert f == pytest.approx(F_STAR, abs=1e-6)
    assert problem.iterations == list(range(len(problem.iterations)))  # one call an iteration
    # KKT at the optimum (IPOPT's sign: grad f + J^T lam = bound multipliers, here only x1).
    grad_l = problem.gradient(x) + problem.jacobian(x).reshape(2, 4).T @ lam
    np.testing.assert_allclose(grad_l[1:], 0.0, atol=1e-7)


def test_a_warm_start_from_the_multipliers_takes_fewer_iterations():
    cold = HS071()
    x, _, _, lam = solve(cold)
    warm = HS071()
    x2, _, status, _ = solve(
        warm, x0=x, multipliers0=lam, warm_start_init_point="yes", mu_init=1e-9
    )
    assert status == 0 and len(warm.iterations) < len(cold.iterations)
    np.testing.assert_allclose(x2, X_STAR, atol=1e-6)


class Failing(HS071):
    def hessian(self, x, lam, sigma):
        raise KeyError("the Hessian's own error")


def test_an_exception_in_a_callback_ends_the_solve_and_is_raised_again():
    with pytest.raises(KeyError, match="the Hessian's own error"):
        solve(Failing())


class FailingAtTheFirstTrialPoint(HS071):
    """Its constraints cannot be evaluated at the first point IPOPT tries after the start."""

    def __init__(self, recoverable: bool):
        super().__init__()
        self.calls, self.errors = 0, []
        if recoverable:
            self.evaluation_error = lambda z, e: self.errors.append((z.copy(), e)) is None

    def constraints(self, x):
        self.calls += 1
        if self.calls == 2:
            raise FloatingPointError("no value here")
        return super().constraints(x)


def test_an_evaluation_error_at_a_trial_point_makes_ipopt_step_back():
    """Where `evaluation_error` says so, a failed evaluation of the constraints is reported
    to IPOPT as an evaluation error: it cuts its step back and reaches the optimum; without
    it the exception ends the solve."""
    problem = FailingAtTheFirstTrialPoint(recoverable=True)
    x, _, status, _ = solve(problem)
    assert status == 0
    np.testing.assert_allclose(x, X_STAR, atol=1e-6)
    [(z, error)] = problem.errors
    assert isinstance(error, FloatingPointError)
    assert not np.allclose(z, [1.0, 5.0, 5.0, 1.0])  # a trial point, not the start
    with pytest.raises(FloatingPointError, match="no value here"):
        solve(FailingAtTheFirstTrialPoint(recoverable=False))


class Stopping(HS071):
    def intermediate(self, it, obj, inf_pr):
        super().intermediate(it, obj, inf_pr)
        return it < 2


def test_an_intermediate_callback_returning_false_stops_the_solve():
    problem = Stopping()
    _, _, status, _ = solve(problem)
    assert status == 5 and problem.iterations == [0, 1, 2]  # user_requested_stop


@pytest.mark.parametrize(
    "option, value",
    [
        ("no_such_option", 1.0),
        ("max_iter", "many"),
        ("tol", -1.0),
        ("max_cpu_time", 10),
        ("print_user_options", True),
        ("tol", True),
    ],
)
def test_a_refused_option_raises_naming_it(option, value):
    with pytest.raises(ValueError, match=rf"refused the option '{option}'"):
        solve(HS071(), **{option: value})


def test_a_refused_optional_option_is_skipped_and_the_others_still_checked():
    """constrax's own defaults (a MUMPS ordering) are `optional`: an IPOPT that does not
    know one (a library built without MUMPS) solves without it; a user's option is not."""
    x, _, status, _ = solve(HS071(), optional={"no_such_option"}, no_such_option=1)
    assert status == 0
    np.testing.assert_allclose(x, X_STAR, atol=1e-6)
    with pytest.raises(ValueError, match="refused the option 'tol'"):
        solve(HS071(), optional={"no_such_option"}, no_such_option=1, tol=-1.0)


def test_numpy_scalars_are_options_of_their_kind():
    problem = HS071()
    _, _, status, _ = solve(problem, max_iter=np.int64(50), tol=np.float32(1e-8))
    assert status == 0


def test_another_ipopt_library_reaches_the_same_optimum():
    """CasADi's wheel bundles its own IPOPT (3.14.19, MUMPS 5.8): called through `library=`,
    the published optimum, and the point cyipopt's IPOPT reaches to the tolerance."""
    casadi = pytest.importorskip("casadi")
    path = next(iter(sorted(Path(casadi.__file__).parent.glob("libipopt.so*"))), None)
    if path is None:
        pytest.skip("this casadi wheel has no libipopt.so")
    ours, theirs = HS071(), HS071()
    x, _, status, _ = solve(ours)
    x2, _, status2, _ = solve(theirs, library=str(path))
    assert status == status2 == 0
    np.testing.assert_allclose(x2, X_STAR, atol=1e-6)
    np.testing.assert_allclose(x2, x, atol=1e-8)


def test_a_library_that_is_not_ipopt_3_14_is_refused_naming_it(tmp_path):
    from constrax import fit

    missing = tmp_path / "libipopt.so"
    with pytest.raises(ValueError, match=r"`library` '.*libipopt.so' could not be loaded"):
        _ipopt_c.library(str(missing))
    libm = ctypes.util.find_library("m")
    with pytest.raises(ValueError, match=r"is not the C interface of IPOPT 3.14.*CreateIpopt"):
        _ipopt_c.library(libm)
    with pytest.raises(TypeError, match="`library` must be the path"):
        fit.IPOPT(library=3)

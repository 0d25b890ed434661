r"""IPOPT's C interface (`IpStdCInterface.h`, IPOPT 3.14) through `ctypes`, with every array
passed as a numpy view of IPOPT's own memory.

The library is the one `cyipopt` is linked to (the `cyipopt-wheels` distribution bundles
IPOPT 3.14 with MUMPS and OpenBLAS): its C symbols are looked up through `cyipopt`'s
extension module, so no second copy is loaded and no path is guessed. `cyipopt`'s own
callbacks are not used: they copy the Jacobian and Hessian values into IPOPT's buffers one
Python-level index at a time: 2.4 ms per Jacobian of the knife-edge parking problem at
$N = 100$ (32 500 entries), 36 ms of a 0.18 s solve (`benchmarks/trajopt_sparsity.py`;
docs page "Trajectory optimisation"). `library(path)` loads another IPOPT (3.14 or later).
"""

import ctypes
import importlib
import numbers
import os
from typing import Protocol

import numpy as np

_F, _I, _B, _V = ctypes.c_double, ctypes.c_int, ctypes.c_bool, ctypes.c_void_p
_FP, _IP = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
# The callback types of IpStdCInterface.h (3.14: `bool` results, `int` indices).
_EVAL_F = ctypes.CFUNCTYPE(_B, _I, _FP, _B, _FP, _V)
_EVAL_GRAD_F = ctypes.CFUNCTYPE(_B, _I, _FP, _B, _FP, _V)
_EVAL_G = ctypes.CFUNCTYPE(_B, _I, _FP, _B, _I, _FP, _V)
_EVAL_JAC_G = ctypes.CFUNCTYPE(_B, _I, _FP, _B, _I, _I, _IP, _IP, _FP, _V)
_EVAL_H = ctypes.CFUNCTYPE(_B, _I, _FP, _B, _F, _I, _FP, _B, _I, _IP, _IP, _FP, _V)
_INTERMEDIATE = ctypes.CFUNCTYPE(_B, _I, _I, _F, _F, _F, _F, _F, _F, _F, _F, _I, _V)

_SIGNATURES = {
    "CreateIpoptProblem": (
        _V,
        [_I, _FP, _FP, _I, _FP, _FP, _I, _I, _I]
        + [_EVAL_F, _EVAL_G, _EVAL_GRAD_F, _EVAL_JAC_G, _EVAL_H],
    ),
    "FreeIpoptProblem": (None, [_V]),
    "AddIpoptStrOption": (_B, [_V, ctypes.c_char_p, ctypes.c_char_p]),
    "AddIpoptNumOption": (_B, [_V, ctypes.c_char_p, _F]),
    "AddIpoptIntOption": (_B, [_V, ctypes.c_char_p, _I]),
    "SetIntermediateCallback": (_B, [_V, _INTERMEDIATE]),
    "IpoptSolve": (_I, [_V, _FP, _FP, _FP, _FP, _FP, _FP, _V]),
}

_LIBRARIES: dict = {}


def library(path: str | os.PathLike | None = None) -> ctypes.CDLL:
    """IPOPT's C interface: from the library `cyipopt`'s extension module is linked to
    (`path=None`), or from the shared library at `path` (IPOPT 3.14 or later)."""
    path = None if path is None else os.fspath(path)
    if path in _LIBRARIES:
        return _LIBRARIES[path]
    if path is None:
        cyipopt = importlib.import_module("cyipopt")  # loads the libraries it links
        version = tuple(getattr(cyipopt, "IPOPT_VERSION", (0,)))
        if version < (3, 14):
            raise ImportError(
                f"cx.fit.IPOPT needs IPOPT 3.14 or later (its C interface's `bool` callbacks); "
                f"cyipopt is linked to IPOPT {'.'.join(map(str, version))}: pip install "
                "'constrax[trajopt]' (cyipopt-wheels bundles IPOPT 3.14)"
            )
        extension = importlib.import_module("ipopt_wrapper")
        lib = ctypes.CDLL(extension.__file__)  # symbol lookup covers its dependencies
    else:
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise ValueError(f"cx.fit.IPOPT: `library` {path!r} could not be loaded: {e}") from None
        # IPOPT 3.14 added GetIpoptCurrentIterate to the C interface, and changed its
        # callbacks' `Bool` from int to bool: an older library would be called wrongly.
        missing = [n for n in (*_SIGNATURES, "GetIpoptCurrentIterate") if not hasattr(lib, n)]
        if missing:
            raise ValueError(
                f"cx.fit.IPOPT: `library` {path!r} is not the C interface of IPOPT 3.14 or "
                f"later (no {', '.join(missing)})"
            )
    for name, (restype, argtypes) in _SIGNATURES.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes
    _LIBRARIES[path] = lib
    return lib


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(_FP)


def _view(p, n: int) -> np.ndarray:
    return np.ctypeslib.as_array(p, (n,))


class Callbacks(Protocol):
    """What `solve` calls. Numpy arrays in and out; the arrays passed in are views of
    IPOPT's memory, valid during the call only. The Jacobian and Hessian values are those
    on the structures given to `solve`, in their order."""

    def objective(self, z: np.ndarray) -> float: ...
    def gradient(self, z: np.ndarray) -> np.ndarray: ...
    def constraints(self, z: np.ndarray) -> np.ndarray: ...
    def jacobian(self, z: np.ndarray) -> np.ndarray: ...
    def hessian(self, z: np.ndarray, multipliers: np.ndarray, factor: float) -> np.ndarray: ...

    def intermediate(self, iteration: int, objective: float, inf_pr: float) -> bool:
        """Once per iteration; `False` stops the solve."""

    def evaluation_error(self, z: np.ndarray, error: BaseException) -> bool:
        """Optional: whether `error`, raised by `objective` or `constraints` at `z`, is an
        evaluation error of a trial point (reported to IPOPT, which then cuts its step
        back) rather than a failure that stops the solve."""


def _options(lib, problem, options: dict, optional: frozenset = frozenset()) -> None:
    """Set `options` on `problem`; a refused option raises, unless its name is in
    `optional` (constrax's own defaults: e.g. a MUMPS option on a library built without
    MUMPS, which IPOPT does not know)."""
    for key, value in options.items():
        k = str(key).encode()
        if isinstance(value, bool | np.bool_):
            ok = False  # IPOPT's yes/no options are strings
        elif isinstance(value, str):
            ok = lib.AddIpoptStrOption(problem, k, value.encode())
        elif isinstance(value, numbers.Integral):
            ok = lib.AddIpoptIntOption(problem, k, int(value))
        elif isinstance(value, numbers.Real):
            ok = lib.AddIpoptNumOption(problem, k, float(value))
        else:
            ok = False
        if not ok and key not in optional:
            raise ValueError(
                f"cx.fit.IPOPT: IPOPT refused the option {key!r} = {value!r} (unknown name, "
                "wrong type: a str, an int or a float as IPOPT's documentation lists the "
                "option, e.g. 10.0 for a real-valued one; or out of range)"
            )


def solve(
    n: int,
    lo: np.ndarray,
    hi: np.ndarray,
    m: int,
    cl: np.ndarray,
    cu: np.ndarray,
    jacobian_structure: tuple[np.ndarray, np.ndarray],
    hessian_structure: tuple[np.ndarray, np.ndarray],
    callbacks: Callbacks,
    x0: np.ndarray,
    options: dict,
    multipliers0: np.ndarray | None = None,
    library_path: str | None = None,
    optional: frozenset = frozenset(),
):
    """One IPOPT solve: `(x, objective, status code, constraint multipliers)`, by the IPOPT
    of `library(library_path)`; the names in `optional` are options IPOPT may refuse
    (`_options`). An exception raised by a callback stops the solve (the
    callback reports a failed evaluation and the next iteration stops) and is raised again
    here, unless `callbacks.evaluation_error` says it is an evaluation error of a trial
    point (the objective or the constraints only): IPOPT is then told the evaluation failed,
    and cuts its step back."""
    lib = library(library_path)
    f64 = lambda a: np.ascontiguousarray(a, np.float64)  # noqa: E731
    lo, hi, cl, cu = f64(lo), f64(hi), f64(cl), f64(cu)
    jr, jc = (np.ascontiguousarray(a, np.intc) for a in jacobian_structure)
    hr, hc = (np.ascontiguousarray(a, np.intc) for a in hessian_structure)
    failed: list[BaseException] = []

    evaluation_error = getattr(callbacks, "evaluation_error", None)

    def guarded(fn, trial: bool = False):
        def call(*args):
            if failed:
                return False
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 (raised again after the solve)
                if not (trial and evaluation_error and evaluation_error(_view(args[1], n), e)):
                    failed.append(e)
                return False
            return True

        return call

    def eval_f(_, x, _new, out, _u):
        out[0] = callbacks.objective(_view(x, n))

    def eval_grad_f(_, x, _new, out, _u):
        _view(out, n)[:] = callbacks.gradient(_view(x, n))

    def eval_g(_, x, _new, _m, out, _u):
        _view(out, m)[:] = callbacks.constraints(_view(x, n))

    def eval_jac_g(_, x, _new, _m, nnz, rows, cols, out, _u):
        if not out:
            _view(rows, nnz)[:], _view(cols, nnz)[:] = jr, jc
        else:
            _view(out, nnz)[:] = callbacks.jacobian(_view(x, n))

    def eval_h(_, x, _new, factor, _m, lam, _newl, nnz, rows, cols, out, _u):
        if not out:
            _view(rows, nnz)[:], _view(cols, nnz)[:] = hr, hc
        else:
            _view(out, nnz)[:] = callbacks.hessian(_view(x, n), _view(lam, m), factor)

    def intermediate(_mode, it, obj, inf_pr, *_):
        if failed:
            return False
        try:
            return callbacks.intermediate(it, obj, inf_pr) is not False
        except BaseException as e:  # noqa: BLE001 (raised again after the solve)
            failed.append(e)
            return False

    # Kept referenced until IPOPT returns: ctypes frees a callback with its Python object.
    c_callbacks = (
        _EVAL_F(guarded(eval_f, trial=True)),
        _EVAL_G(guarded(eval_g, trial=True)),
        _EVAL_GRAD_F(guarded(eval_grad_f)),
        _EVAL_JAC_G(guarded(eval_jac_g)),
        _EVAL_H(guarded(eval_h)),
    )
    c_intermediate = _INTERMEDIATE(intermediate)
    problem = lib.CreateIpoptProblem(
        n, _ptr(lo), _ptr(hi), m, _ptr(cl), _ptr(cu), jr.size, hr.size, 0, *c_callbacks
    )
    if not problem:
        raise ValueError(f"cx.fit.IPOPT: IPOPT refused the problem (n = {n}, m = {m})")
    try:
        _options(lib, problem, options, optional)
        lib.SetIntermediateCallback(problem, c_intermediate)
        x = np.array(x0, np.float64)
        g, obj = np.zeros(m), np.zeros(1)
        mult_g = np.zeros(m) if multipliers0 is None else np.array(multipliers0, np.float64)
        mult_lo, mult_hi = np.zeros(n), np.zeros(n)
        status = lib.IpoptSolve(
            problem, _ptr(x), _ptr(g), _ptr(obj), _ptr(mult_g), _ptr(mult_lo), _ptr(mult_hi), None
        )
    finally:
        lib.FreeIpoptProblem(problem)
    if failed:
        raise failed[0]
    return x, float(obj[0]), int(status), mult_g

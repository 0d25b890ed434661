r"""Converters from the method objects of `sympy.physics.mechanics` to `cx.System`:
`from_lagranges_method` (a `LagrangesMethod`: its Lagrangian, constraint equations and
`forcelist`, through `from_lagrangian`) and `from_kanes_method` (a `KanesMethod`: Kane's
equations rewritten in the velocities, its velocity constraints' forces as multipliers).
See `docs/interop/sympy.md`.

sympy is imported inside the functions, so that `import constrax` does not import it.
"""

from collections.abc import Sequence

from ._sympy import SympySystem, _build, _rows, from_lagrangian
from ._sympy_compile import (
    Namespace,
    import_sympy,
    is_affine_in,
)


def from_lagranges_method(
    method, *, inputs: Sequence = (), input_vector: str | None = None, backend: str = "lambdify"
) -> SympySystem:
    r"""Convert a `sympy.physics.mechanics.LagrangesMethod` into a `cx.System`.

    Reads the method's Lagrangian, coordinates, holonomic and nonholonomic constraint
    equations, `forcelist` and inertial frame, and converts them with `from_lagrangian`:
    the result has the equations of motion the method forms
    (`form_lagranges_equations`), with the generalized forces of the `forcelist` in the
    system's `force` and the constraint forces left to the engine's multipliers.
    `form_lagranges_equations` need not have been called.

    **Arguments:**

    - `method`: the `LagrangesMethod`.
    - `inputs`, `input_vector`, `backend`: as for `from_lagrangian`.

    **Returns:** a `SympySystem`.

    **Example:**

    A pendulum in Cartesian coordinates, the rod as a holonomic constraint and gravity as
    a load:

    ```python
    import sympy as sp
    import sympy.physics.mechanics as me
    import constrax.interop

    x, y = me.dynamicsymbols("x y")
    m, l, g = sp.symbols("m l g")
    N = me.ReferenceFrame("N")
    P = me.Point("P")
    P.set_vel(N, x.diff() * N.x + y.diff() * N.y)
    L = me.Lagrangian(N, me.Particle("bob", P, m))
    lm = me.LagrangesMethod(
        L, [x, y], hol_coneqs=[x**2 + y**2 - l**2], forcelist=[(P, -m * g * N.y)], frame=N
    )
    pendulum = constrax.interop.from_lagranges_method(lm)
    pendulum.system.constraints  # (a cx.Holonomic named "hol_coneqs",)
    ```
    """
    _, me = import_sympy()
    if not isinstance(method, me.LagrangesMethod):
        raise TypeError(
            f"from_lagranges_method: expected a sympy LagrangesMethod, got {type(method).__name__}"
        )
    try:
        L = method._L
        hol = list(method._hol_coneqs)
    except AttributeError as err:  # pragma: no cover - a future sympy
        raise TypeError(
            "from_lagranges_method: this sympy version's LagrangesMethod does not expose its "
            "Lagrangian and holonomic constraints where constrax reads them (`_L`, "
            "`_hol_coneqs`); use constrax.interop.from_lagrangian"
        ) from err
    coneqs = list(method.coneqs)
    nonhol = coneqs[len(hol) :]
    return from_lagrangian(
        L,
        list(method.q),
        hol_coneqs=hol,
        nonhol_coneqs=nonhol,
        forcelist=method.forcelist or (),
        frame=method.inertial,
        inputs=inputs,
        input_vector=input_vector,
        backend=backend,
    )


def from_kanes_method(
    method, *, inputs: Sequence = (), input_vector: str | None = None, backend: str = "lambdify"
) -> SympySystem:
    r"""Convert a `sympy.physics.mechanics.KanesMethod` into a `cx.System` with the same
    motion.

    Supported: kinematic differential equations that give as many speeds $u$ as
    coordinates $q$ (dependent ones included), affine in $u$,
    $\dot q = K(t, q)\,u + k(t, q)$ with $K$ invertible where the system is used,
    configuration constraints, velocity constraints, and the bodies and loads given to
    `kanes_equations` (which must have been called). Not supported (a `ValueError` says
    so): auxiliary speeds, and more coordinates than speeds (e.g. quaternions).

    The conversion rewrites Kane's equations for *all* speeds, with the constraint
    forces of the velocity constraints $B u + b = 0$ as multipliers,
    $M(q)\dot u = F(t, q, u) + B^\top\lambda$ ($M$, $F$ from a `KanesMethod` over the same
    bodies and loads with every speed independent), in the velocities $\dot q$ through
    $u = Y(\dot q - k)$, $Y = K^{-1}$, $\dot u = Y\ddot q + h(t, q, \dot q)$:

    $$W\ddot q = f + (BY)^\top\lambda,\quad W = Y^\top M Y,\quad f = Y^\top(F - Mh).$$

    The `cx.System` has the Lagrangian $L = \tfrac12\dot q^\top W\dot q$ (the kinetic
    energy when $k = 0$ and nothing moves on its own), the generalized force
    $Q = f - f_L$ with $f_L$ the Lagrangian's own bias term (so $Q$ carries the loads
    *and* the velocity-dependent inertia terms; it is not the loads alone), configuration
    constraints as one `cx.Holonomic` (`"hol_coneqs"`) and velocity constraints, written
    in $\dot q$, as one `cx.Pfaffian` (`"nonhol_coneqs"`). Its accelerations are those of
    `method.rhs()` (mapped to $\ddot q$). Gravity given as a load is part of $Q$, so
    `cx.energy` of the result is the kinetic energy only.

    Kane's velocity constraints usually contain the time derivative of the configuration
    constraints (they must, for the dependent speeds). The stacked rows are then
    redundant: the default `cx.AutoSolver()` (and `cx.UdwadiaKalaba()`) handle that,
    splitting the reactions between the redundant rows by least norm, while `cx.KKT()`
    reports a singular system. The configuration constraints are kept so that
    `cx.consistent_initial_state` and stabilisation can act on positions.

    **Arguments:**

    - `method`: a `KanesMethod` on which `kanes_equations(bodies, loads)` has been called.
    - `inputs`, `input_vector`, `backend`: as for `from_lagrangian`.

    **Returns:** a `SympySystem`; `q` holds the method's coordinates `method.q`
    (independent, then dependent) and `qd` their time derivatives (not the speeds: map
    speeds to `qd` with `method.kindiffdict()`).

    **Example:**

    A pendulum with the angular speed `u` as generalized speed:

    ```python
    import sympy as sp
    import sympy.physics.mechanics as me
    import constrax.interop

    q, u = me.dynamicsymbols("q u")
    m, l, g = sp.symbols("m l g")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q, N.z])
    A.set_ang_vel(N, u * N.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", -l * A.y)
    P.v2pt_theory(O, N, A)
    km = me.KanesMethod(N, q_ind=[q], u_ind=[u], kd_eqs=[q.diff() - u])
    km.kanes_equations([me.Particle("bob", P, m)], [(P, -m * g * N.y)])
    pendulum = constrax.interop.from_kanes_method(km)
    ```
    """
    sp, me = import_sympy()
    if not isinstance(method, me.KanesMethod):
        raise TypeError(
            f"from_kanes_method: expected a sympy KanesMethod, got {type(method).__name__}"
        )
    if getattr(method, "_fr", None) is None or method.bodies is None:
        raise ValueError(
            "from_kanes_method: call `method.kanes_equations(bodies, loads)` first; the "
            "conversion reads the bodies and loads given there"
        )
    if len(getattr(method, "_uaux", ()) or ()):
        raise ValueError(
            "from_kanes_method: auxiliary speeds (u_auxiliary) are not supported; they serve "
            "to compute constraint forces, which constrax reports as `reactions` anyway"
        )
    t = me.dynamicsymbols._t
    qs, us = list(method.q), list(method.u)
    if len(qs) != len(us):
        raise ValueError(
            f"from_kanes_method: needs as many speeds as coordinates to write the motion in "
            f"(q, qd); got {len(qs)} coordinates {qs} and {len(us)} speeds {us}"
        )
    kdd = method.kindiffdict()
    qdots = [q.diff(t) for q in qs]
    qd_of_u = sp.Matrix([kdd[qd] for qd in qdots])
    K = qd_of_u.jacobian(us)
    k = qd_of_u.xreplace(dict.fromkeys(us, 0))
    if not is_affine_in(list(qd_of_u), us):
        raise ValueError(
            "from_kanes_method: the kinematic differential equations must be affine in the "
            f"speeds, qd = K(q) u + k(q); got qd = {list(qd_of_u)}"
        )
    u_of_qd = K.LUsolve(sp.Matrix(qdots) - k)
    u_rule = dict(zip(us, u_of_qd, strict=True))
    # Kane's equations for all speeds, every speed independent, same bodies and loads.
    kd_eqs = [qd - kdd[qd] for qd in qdots]
    free = me.KanesMethod(method._inertial, q_ind=qs, u_ind=us, kd_eqs=kd_eqs)
    free.kanes_equations(list(method.bodies), method.loads)
    M = free.mass_matrix
    F = free.forcing
    Y = u_of_qd.jacobian(qdots)
    qdd_zero = {qd.diff(t): 0 for qd in qdots}
    h = u_of_qd.diff(t).xreplace(qdd_zero)
    to_qd = lambda e: me.msubs(e, u_rule)
    M_q = to_qd(M)
    W = Y.T * M_q * Y
    f = Y.T * (to_qd(F) - M_q * h)
    qd_vec = sp.Matrix(qdots)
    L = (qd_vec.T * W * qd_vec)[0, 0] / 2
    hol = list(getattr(method, "_f_h", []) or [])
    nonhol = []
    k_nh = getattr(method, "_k_nh", None)
    if k_nh is not None and len(k_nh):
        nonhol = list(to_qd(k_nh * sp.Matrix(us) + method._f_nh))
    ns = Namespace(qs, _rows(inputs, "inputs"))
    return _build(
        ns, L, list(f), hol, nonhol, backend, subtract_lagrangian_bias=True,
        input_vector=input_vector,
    )  # fmt: skip

"""`ForwardingSolver`: a `diffrax.AbstractWrappedSolver` that forwards everything diffrax
reads of a solver to the one it wraps; a subclass overrides what it changes (a step, a
dense output). `cx`'s `ProjectedSolver` (docs page "Stabilisation") and the contact
runs' exact-rate solver (docs page "Rolling or sliding") are such wrappers."""

import diffrax
import equinox as eqx


class ForwardingSolver(diffrax.AbstractWrappedSolver):
    """Forwards to `solver` every method and property diffrax reads of a solver."""

    solver: eqx.AbstractVar[diffrax.AbstractSolver]

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    # What diffrax reads (and sets, by `eqx.tree_at`) on the solvers it is handed, which
    # `isinstance` checks forward to the wrapped one: an implicit solver's root finder and a
    # Runge–Kutta solver's `scan_kind`.

    @property
    def root_finder(self):
        """The wrapped implicit solver's root finder (diffrax sets its tolerances)."""
        return self.solver.root_finder

    @property
    def scan_kind(self):
        """The wrapped Runge–Kutta solver's `scan_kind` (diffrax's adjoints set it)."""
        return self.solver.scan_kind

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        return self.solver.step(terms, t0, t1, y0, args, solver_state, made_jump)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)

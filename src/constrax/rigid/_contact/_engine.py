"""The engine's public functions and classes that the contact walk (`_switching`) calls as
`cx.X`, imported from the modules that define them rather than from the package root, so
that `constrax.rigid` does not import `constrax` back (no import circle;
`tests/test_layout.py`). The names are the public ones: `cx.System` here is `cx.System`.
"""

from ..._diagnostics import (
    constraint_jacobian as constraint_jacobian,
    energy as energy,
)
from ..._dynamics import accelerations as accelerations
from ..._stabilisation import Baumgarte as Baumgarte, Projection as Projection
from ..._system import System as System
from ..._terms import mass_matrix as mass_matrix

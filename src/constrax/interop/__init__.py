"""Interoperability: build `cx.System`s from other tools' descriptions.

`from_lagrangian`, `from_lagranges_method` and `from_kanes_method` convert
`sympy.physics.mechanics` systems (see `docs/interop/sympy.md`). Importing this package does
not import sympy; the converters do, when called.
"""

from ._sympy import SympySystem as SympySystem, from_lagrangian as from_lagrangian
from ._sympy_compile import ConversionError as ConversionError
from ._sympy_methods import (
    from_kanes_method as from_kanes_method,
    from_lagranges_method as from_lagranges_method,
)

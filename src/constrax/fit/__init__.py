"""`constrax.fit`: differentiable workflows — parameter identification and trajectory
optimisation through `cx.simulate` (DESIGN.md §2 "fit/")."""

from ._checkpoint import load_checkpoint as load_checkpoint
from ._checkpoint import save_checkpoint as save_checkpoint
from ._controls import AbstractControl as AbstractControl
from ._controls import PiecewiseLinear as PiecewiseLinear
from ._identify import (
    IdentificationProblem as IdentificationProblem,
)
from ._identify import (
    Uncertainty as Uncertainty,
)
from ._identify import (
    uncertainty as uncertainty,
)
from ._observations import Observations as Observations
from ._problem import AbstractProblem as AbstractProblem
from ._shooting import (
    AbstractShooting as AbstractShooting,
)
from ._shooting import (
    MultipleShooting as MultipleShooting,
)
from ._shooting import (
    SingleShooting as SingleShooting,
)
from ._solve import EarlyStopping as EarlyStopping
from ._solve import FitResult as FitResult
from ._solve import solve as solve
from ._trajopt import TrajectoryProblem as TrajectoryProblem
from ._transforms import (
    AbstractTransform as AbstractTransform,
)
from ._transforms import (
    Bounded as Bounded,
)
from ._transforms import (
    Identity as Identity,
)
from ._transforms import (
    Positive as Positive,
)
from ._transforms import (
    constrain as constrain,
)
from ._transforms import (
    unconstrain as unconstrain,
)

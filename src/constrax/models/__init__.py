"""`constrax.models`: a zoo of ready-made constrained systems with default parameters and
consistent initial states (each a function `name(**overrides) -> Model`)."""

from ._disk_on_link import (
    disk_on_link as disk_on_link,
    disk_on_link_contact as disk_on_link_contact,
)
from ._model import Model as Model
from ._particles import (
    bead_on_rotating_hoop as bead_on_rotating_hoop,
    nonholonomic_particle as nonholonomic_particle,
)
from ._pendula import pendulum_chain as pendulum_chain
from ._rigid_models import (
    ball_on_turntable as ball_on_turntable,
    disk_and_link as disk_and_link,
    disk_and_link_contact_force as disk_and_link_contact_force,
    free_rigid_body as free_rigid_body,
    rolling_disk_spin_rate as rolling_disk_spin_rate,
    tilted_rolling_disk as tilted_rolling_disk,
    turntable_orbit as turntable_orbit,
)
from ._wheeled import (
    chaplygin_sleigh as chaplygin_sleigh,
    kinematic_car as kinematic_car,
    knife_edge as knife_edge,
    snake_cart as snake_cart,
    vertical_rolling_disk as vertical_rolling_disk,
)

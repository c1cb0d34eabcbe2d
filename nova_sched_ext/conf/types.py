# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.


"""Option types of nova-sched-ext beyond oslo.config's own.

Imports nothing but oslo.config.
"""

import math

from oslo_config import cfg
from oslo_config import types


class FiniteFloat(types.Float):
    """oslo.config's Float type that also refuses ``nan`` and ``inf``.

    Python's ``float()`` reads ``nan``, ``inf`` and ``1e999`` (infinity)
    without complaint, and ``nan`` passes every ``min``/``max`` check
    (each comparison with it is false).  One such value in a multiplier or
    an interval makes every result it touches ``nan`` or endless, far from
    the option that caused it.
    """

    def __call__(self, value):
        number = super().__call__(value)
        if not math.isfinite(number):
            raise ValueError('%r is not a finite number' % (value,))
        return number


class FiniteFloatOpt(cfg.FloatOpt):
    """``cfg.FloatOpt`` whose values must be finite numbers.

    Every floating-point option of the package is one of these: a unit
    test walks the options of every ``oslo.config.opts`` entry point of the
    package and refuses a plain ``cfg.FloatOpt``.
    """

    def __init__(self, name, min=None, max=None, **kwargs):
        # FloatOpt's own __init__ would set a plain Float type.
        cfg.Opt.__init__(self, name, type=FiniteFloat(min, max), **kwargs)

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

"""Checks of configured values that oslo.config leaves to the first read."""

import math

from oslo_config import cfg

from nova_sched_ext import exception as sched_ext_exception


class InvalidOptionValue(cfg.Error, sched_ext_exception.UserFacingError):
    """A configured value its option refuses; the message names the option."""


def check_values(conf, listed):
    """Read every option of ``listed`` once, so that a bad value stops a start.

    oslo.config checks a value against its option's type, bounds and
    choices only when the option is read, and a service reads some options
    at its first request, in a forked worker, or never: a value out of
    bounds would then end in a traceback long after the service started,
    or not at all.  An option or group that is not registered is skipped.

    :param listed: ``[(group, [options])]``, as a ``list_opts`` returns
    :raises InvalidOptionValue: for the first value refused
    """
    for group, opts in listed:
        group_name = getattr(group, 'name', group) or 'DEFAULT'
        for opt in opts:
            try:
                if group_name == 'DEFAULT':
                    value = conf[opt.dest]
                else:
                    value = conf[group_name][opt.dest]
            except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
                continue
            except cfg.ConfigSourceValueError as exc:
                # oslo.config's message names the option by its location
                # object; the reason is what the operator needs.
                reason = str(exc).rpartition(' is not valid: ')[2]
                raise InvalidOptionValue(
                    'invalid value of [%s] %s: %s'
                    % (group_name, opt.dest, reason)) from None
            if isinstance(value, float) and not math.isfinite(value):
                # A float option of a library (keystoneauth's timeouts in
                # the service-credential sections) takes nan and inf.
                raise InvalidOptionValue(
                    'invalid value of [%s] %s: %s is not a finite number'
                    % (group_name, opt.dest, value))

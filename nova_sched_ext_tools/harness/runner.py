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

"""Run a scenario on a real in-process Nova outside of a test runner.

Nova's functional harness is a ``testtools`` test case: its ``setUp`` builds
the databases, placement, the services and their clean-up.  Rather than
re-create that by hand, :func:`run_scenario` instantiates one test case per
scenario and runs it with a result object that keeps what the demo needs:
the boot results on success, the traceback and Nova's captured log on
failure.
"""

import dataclasses
import logging
import sys
import tempfile
import time

import testtools

from nova_sched_ext_tools.harness import cloud

LOG_FORMAT = '%(asctime)s %(levelname)s [%(name)s] %(message)s'


@dataclasses.dataclass
class ScenarioRun:
    """What happened when a scenario ran."""

    scenario: object
    #: per boot, the ``BootResult`` list under the scenario's setup
    results: list = None
    #: the same under its reference setup (None if not compared)
    reference: list = None
    #: a ``cloud.SetupRun`` per setup, in the order they ran
    runs: list = None
    available_filters: list = None
    enabled_filters: list = None
    weight_classes: list = None
    fit_backend: str = None
    seconds: float = 0.0
    #: traceback if the harness failed (not a scheduling surprise)
    error: str = None
    #: file with Nova's log of a failed run
    log_path: str = None

    def problems(self):
        """Scheduling surprises: unmet expectations, differences to Nova."""
        if self.results is None:
            return []
        problems = []
        for boot, results in zip(self.scenario.boots, self.results):
            problems.extend(boot.check(results))
        if self.reference is None:
            return problems + self.capacity_problems()
        if self.scenario.same_as_reference:
            problems.extend(cloud.compare_runs(self.reference, self.results))
            return problems + self.capacity_problems()
        label = self.scenario.reference.label
        for boot, results in zip(self.scenario.boots, self.reference):
            problems.extend('%s: %s' % (label, problem)
                            for problem in boot.check(results, True))
        return problems + self.capacity_problems()

    def capacity_problems(self):
        """Where the capacity count disagreed with a boot, per run."""
        problems = []
        for each in self.runs or ():
            if each.capacity is not None:
                problems.extend('capacity, %s: %s' % (each.setup.label,
                                                      problem)
                                for problem in each.capacity.problems())
        return problems

    @property
    def ok(self):
        return self.error is None and not self.problems()


class ScenarioCase(cloud.NUMACloudTestBase):
    """One scenario as a test case, so Nova's harness sets everything up."""

    def __init__(self, scenario, run, compare=True, log_level=None,
                 count_capacity=True):
        super().__init__('test_scenario')
        self.HOSTS = scenario.hosts
        self.EXTRA_FLAGS = scenario.flags
        self.COUNT_CAPACITY = count_capacity
        # Start as the first run needs, so nova-scheduler starts only once
        # per setup.
        self._setups = scenario.setups(compare)
        self.NUMA_FIT = self._setups[0].numa_fit
        self.WEIGHT_CLASSES = self._setups[0].weight_classes
        self._scenario = scenario
        self._run = run
        self._log_level = log_level

    def setUp(self):
        # Nova's harness captures all logging; show it live if asked.  The
        # handler goes on before the services start so their start-up shows.
        if self._log_level is not None:
            self.addCleanup(self._stop_live_log, self._start_live_log())
        super().setUp()

    def _start_live_log(self):
        handler = _LiveLogHandler(self._log_level)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.attach()
        return handler

    @staticmethod
    def _stop_live_log(handler):
        handler.detach()

    def test_scenario(self):
        runs = self.run_setups(self._scenario.boots, self._setups)
        last = runs[-1]
        self._run.runs = runs
        self._run.results = last.results
        if len(runs) > 1:
            self._run.reference = runs[0].results
        self._run.available_filters = last.available_filters
        self._run.weight_classes = last.weight_classes
        # What the running scheduler loaded, not just what was asked for.
        self._run.enabled_filters = last.enabled_filters
        self._run.fit_backend = _fit_backend()


class _LiveLogHandler(logging.Handler):
    """Writes Nova's log records to stderr while the scenario runs.

    Nova's ``StandardLogging`` fixture replaces the root logger's handlers
    to capture everything, so this handler sits on the top-level loggers of
    the services instead, which the fixture leaves alone.
    """

    LOGGERS = ('nova', 'placement', 'nova_sched_ext')

    def __init__(self, level):
        super().__init__(level=level)
        self.stream = sys.stderr

    def emit(self, record):
        try:
            self.stream.write(self.format(record) + '\n')
        except Exception:
            self.handleError(record)

    def attach(self):
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)

    def detach(self):
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)


def _fit_backend():
    try:
        from nova_sched_ext.fit import engine
        return engine.backend_name()
    except Exception:  # the demo reports it; it must not fail on it
        return 'unknown'


class _KeepDetails(testtools.TestResult):
    """A test result that keeps the details of the first failure."""

    def __init__(self):
        super().__init__()
        self.failure = None

    def _keep(self, test, err, details):
        if self.failure is None:
            if details is None and err is not None:
                details = {'traceback': testtools.content.TracebackContent(
                    err, test)}
            self.failure = details or {}

    def addError(self, test, err=None, details=None):
        super().addError(test, err, details)
        self._keep(test, err, details)

    def addFailure(self, test, err=None, details=None):
        super().addFailure(test, err, details)
        self._keep(test, err, details)


def run_scenario(scenario, compare=True, log_level=None,
                 count_capacity=True):
    """Start Nova on the scenario's hosts, boot its servers, tear down.

    :param compare: also run the boots under the scenario's reference
        setup first and compare (twice the boots, same hosts).
    :param log_level: mirror Nova's log at this level to stderr, or None.
    :param count_capacity: count the capacity of the scenario's flavors
        before and after the boots, and check the count at every request
        (``capacity_check``).
    :returns: a :class:`ScenarioRun`.
    """
    run = ScenarioRun(scenario)
    case = ScenarioCase(scenario, run, compare=compare, log_level=log_level,
                        count_capacity=count_capacity)
    result = _KeepDetails()
    started = time.monotonic()
    case.run(result)
    run.seconds = time.monotonic() - started
    if result.failure is not None:
        details = result.failure
        traceback = details.get('traceback')
        run.error = (traceback.as_text() if traceback is not None
                     else 'the scenario failed without a traceback')
        run.log_path = _write_details(details)
    return run


def _write_details(details):
    with tempfile.NamedTemporaryFile(
            'w', prefix='nova-sched-ext-demo-', suffix='.log',
            delete=False) as log:
        for name, content in sorted(details.items()):
            log.write('==== %s ====\n' % name)
            try:
                log.write(content.as_text())
            except Exception as exc:  # binary or broken detail
                log.write('(cannot show: %s)' % exc)
            log.write('\n')
    return log.name

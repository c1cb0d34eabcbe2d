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

"""The preemptible extra spec, through Nova's own validator machinery."""

from unittest import mock

import fixtures
from nova.api.openstack.compute import flavors_extraspecs
from nova.api.validation.extra_specs import validators
from nova import exception
from nova import objects
from nova.tests.unit.api.openstack import fakes
from stevedore import extension

from nova_sched_ext.preemption import extra_specs
from tests import base

KEY = extra_specs.PREEMPTIBLE_KEY


class TestValidator(base.TestCase):

    def test_nova_loads_the_entry_point(self):
        # Nova fills VALIDATORS with stevedore at import: the object there
        # must be ours, found through the package's entry point.
        self.assertIs(extra_specs.EXTRA_SPEC_VALIDATORS[0],
                      validators.VALIDATORS[KEY])
        self.assertIn('nova_sched_ext', validators.NAMESPACES)
        mgr = extension.ExtensionManager('nova.api.extra_spec_validators')
        self.assertIs(extra_specs, mgr['nova_sched_ext'].plugin)

    def test_boolean_values_pass(self):
        for value in ('true', 'false', 'True', 'FALSE', '1', '0', 'yes',
                      'no', 'on', 'off'):
            validators.validate(KEY, value)

    def test_bad_values_are_rejected(self):
        for value in ('maybe', '', '2', 'truee'):
            exc = self.assertRaises(exception.ValidationError,
                                    validators.validate, KEY, value)
            self.assertIn('boolean', str(exc))
            self.assertEqual(400, exc.code)

    def test_unknown_key_of_the_namespace_is_rejected(self):
        exc = self.assertRaises(exception.ValidationError,
                                validators.validate,
                                'nova_sched_ext:preemptable', 'true')
        self.assertIn('nova_sched_ext:preemptable', str(exc))

    def test_other_namespaces_untouched(self):
        validators.validate('somebody_else:anything', 'whatever')

    def test_flavor_extra_spec_api_rejects_bad_value(self):
        controller = flavors_extraspecs.FlavorExtraSpecsController()
        request = fakes.HTTPRequest.blank('', version='2.86')
        controller._check_extra_specs_value(request, {KEY: 'yes'})
        self.assertRaises(exception.ValidationError,
                          controller._check_extra_specs_value, request,
                          {KEY: 'sometimes'})


class TestIsPreemptible(base.TestCase):

    def setUp(self):
        super().setUp()
        # Start each test with no invalid value already warned about.
        self.useFixture(fixtures.MockPatchObject(extra_specs, '_warned',
                                                 set()))

    def test_flavor_object(self):
        self.assertTrue(extra_specs.is_preemptible(
            objects.Flavor(extra_specs={KEY: 'true'})))
        self.assertFalse(extra_specs.is_preemptible(
            objects.Flavor(extra_specs={KEY: 'False'})))

    def test_dict_of_extra_specs(self):
        self.assertTrue(extra_specs.is_preemptible({KEY: 'yes'}))
        self.assertTrue(extra_specs.is_preemptible({KEY: '1'}))
        self.assertFalse(extra_specs.is_preemptible({KEY: 'no'}))

    def test_missing_key_or_extra_specs(self):
        self.assertFalse(extra_specs.is_preemptible({}))
        self.assertFalse(extra_specs.is_preemptible(None))
        self.assertFalse(extra_specs.is_preemptible(objects.Flavor()))
        self.assertFalse(extra_specs.is_preemptible(
            objects.Flavor(extra_specs={'hw:cpu_policy': 'dedicated'})))

    def test_invalid_value_is_false_and_warned_once(self):
        flavor = objects.Flavor(flavorid='old-spot', extra_specs={KEY: 'bad'})
        with mock.patch.object(extra_specs.LOG, 'warning') as warning:
            self.assertFalse(extra_specs.is_preemptible(flavor))
            self.assertFalse(extra_specs.is_preemptible(flavor))
        self.assertEqual(1, warning.call_count)
        self.assertEqual('old-spot', warning.call_args[0][1]['flavor'])

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

"""Sphinx configuration of the nova-sched-ext documentation."""

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
]

# openstackdocstheme
openstackdocs_repo_name = 'openstack/nova-sched-ext'
openstackdocs_bug_project = 'nova-sched-ext'
openstackdocs_bug_tag = 'doc'
openstackdocs_auto_name = False

project = 'nova-sched-ext'
copyright = 'nova-sched-ext developers'
master_doc = 'index'
source_suffix = '.rst'
exclude_patterns = ['_build']
pygments_style = 'native'

html_theme = 'openstackdocs'
html_static_path = []

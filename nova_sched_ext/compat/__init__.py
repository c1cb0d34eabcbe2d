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

"""The one seam between the package and upstream names that are no API.

Nova, placement and tooz document few names for a plugin to use; the
package needs more: a private method of ``PciDeviceStats`` to count the
devices a request could take, the hooks of ``HostManager`` that the kept
host state replaces, the tables of the cell database it reads in bulk,
the redis client factory of tooz.  Every such use lives here, and only
here, as a small function or constant that says which upstream name it
stands for, which release it was read from and what it returns:

* :mod:`nova_sched_ext.compat.nova`: Nova (read from Nova 34.0.0,
  2026.2);
* :mod:`nova_sched_ext.compat.tooz`: tooz (read from tooz 9.1.0).

Each entry has a unit test (``tests/unit/test_compat.py``) that fails
when the upstream name changes (it is gone, its signature moved, a table
lost a column, or it no longer does what the entry relies on), and the
same file fails when any other module of the package touches a private
upstream name or imports an undocumented upstream module (the deny list
there), so that an upgrade of Nova or tooz touches this package only.

This seam is what the release matrix (Nova 31 to 34: 2025.1, 2025.2,
2026.1, 2026.2) versions: where two releases differ, the entry chooses by
release here, and its test runs against each release.

This ``__init__`` imports nothing: importing the tooz seam does not import
Nova.
"""

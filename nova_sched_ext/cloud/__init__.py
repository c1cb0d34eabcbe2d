"""The one reader of the cloud.

Every feature (capacity, defragmentation, preemption, deployment sets, the
kept host state) reads Nova's cells and databases, compute nodes, services,
flavors, server groups and placement through this package, never through
another feature (doc/source/architecture.rst).
"""

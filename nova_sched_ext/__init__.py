"""Out-of-tree scheduler plugins for OpenStack Nova.

``nova_sched_ext`` adds a C-accelerated NUMA fit engine and the filters,
weighers and scheduler driver built on it.  See ``doc/source`` for what each
plugin does and how to enable it.
"""

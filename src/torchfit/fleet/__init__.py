"""A fleet of nodes as one target: hostlist notation (hostlist.py), the fleet file and
its groups (model.py), gathering it through Slurm (gather.py), and the groups that bind
a fleet's stack (explain.py). docs/cluster.md is the admin's guide."""

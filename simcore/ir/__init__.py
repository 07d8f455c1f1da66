"""The graph vocabulary of the simulator: graph and builder, node kinds, comm types, op templates, DAG
utilities (one topological peel)."""

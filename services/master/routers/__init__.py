"""One router per resource: graphs, sessions, one-shot runs, the cluster, health."""

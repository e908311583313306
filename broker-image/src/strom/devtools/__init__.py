"""Tools for developers that run brokers rather than talk to them: `strom-dev-cluster`'s
supervisor (dev_cluster) and hosts in network namespaces (netns, also the tests' hosts).
They start `strom-server` processes and import nothing of the broker but strom.config."""

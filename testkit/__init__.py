"""Real processes on loopback for the tests and the benchmarks: a broker, a cluster,
an agent, ZooKeeper, and a Kafka client's view of topics. Not part of the installed
distribution; bench/ and tests/ both import it, so neither imports the other."""

"""Job entry points: the only places that read from the broker and write outputs."""

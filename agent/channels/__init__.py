"""Channel plugins: one module per `type:` (memory, file). Discovered by agent/plugins.py."""

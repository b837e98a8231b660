"""The agent's sink plugins: one module or package per `type:` (agent/plugins.py
imports each, and each registers itself)."""

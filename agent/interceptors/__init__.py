"""Interceptors: one module per type (parsers, filters, field adders), found by agent/plugins.py."""

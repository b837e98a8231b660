"""Only the C extension; the rest of the distribution is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("logflume_nginxparse._parse", ["logflume_nginxparse/_parse.c"])])

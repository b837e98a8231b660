"""Only the C extension; the rest of the distribution is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "logflume_recordscheck._check",
            ["logflume_recordscheck/_check.c", "logflume_recordscheck/_decode.c"],
        )
    ]
)

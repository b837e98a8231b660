"""Only the C extension; everything else about the distribution is in pyproject.toml.

`broker.protocol._recordscheck` speeds up the produce path's records check; where it
cannot be built (no C compiler), the broker uses the pure-Python check instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "broker.protocol._recordscheck",
            ["broker/protocol/_recordscheck.c"],
            optional=True,
        )
    ]
)

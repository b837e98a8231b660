"""logflume: the `logflume` command. Subcommands hand off to the packages."""

__version__ = "0.1.0"

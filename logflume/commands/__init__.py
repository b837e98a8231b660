"""One module per `logflume` subcommand; see logflume/cli.py."""

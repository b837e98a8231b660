"""The agent's nginx `combined` parser in C (`_parse.c`).

`parse_combined(events, timed)` gives each plainly shaped line its record and time and
returns the indices of the others; agent/interceptors/nginx.py parses those with its
regex (the reference, and the whole parser where this distribution is not installed).
tests/agent/interceptors/test_nginx_native.py holds the two to the same records.
"""

from logflume_nginxparse._parse import parse_combined

__all__ = ["parse_combined"]

"""`logflume console`: a web page showing a broker cluster, its consumer groups, agents
and the realtime job's per-minute nginx figures, refreshed on its own.

- `console.model`: pure parts (folding nginx-stats rows, rates between two polls,
  agent and broker /metrics summaries, URL lists); unit-tested without sockets.
- `console.kafka`: blocking confluent-kafka reads (metadata, controller, offsets,
  configs, the stats topic, the message browser), run by the server in a thread.
- `console.groups`: the consumer groups (state, members, committed offsets) through
  kafka-python, one DescribeGroups and one OffsetFetch per coordinator.
- `console.auth`: the login: the --auth-file's hashed passwords and tokens, sessions,
  the gate in front of the pages and JSON, and where the console may listen.
- `console.server`: the aiohttp app: `/` and `/static/*` (package files, nothing from
  the internet), the JSON endpoints the page polls, and the snapshot refreshed every
  `REFRESH_SECONDS` that they answer from.
"""

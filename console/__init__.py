"""`logflume console`: a web page showing a broker cluster, its consumer groups, agents
and the realtime job's per-minute nginx figures, refreshed on its own.

- `console.model`: pure parts (folding nginx-stats rows, rates between two polls,
  agent and broker /metrics summaries, URL lists); unit-tested without sockets.
- `console.kafka`: blocking confluent-kafka reads (metadata, controller, offsets,
  groups, the stats topic, the message browser), run by the server in a thread.
- `console.server`: the aiohttp app: `/` and `/static/*` (package files, nothing from
  the internet), the JSON endpoints the page polls, and the snapshot refreshed every
  `REFRESH_SECONDS` that they answer from.
"""

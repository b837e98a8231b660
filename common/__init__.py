"""Small utilities shared by the packages (broker, agent, sources, the command):
durable file writes and host:port addresses. Nothing here imports another package."""

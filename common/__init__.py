"""Small utilities shared by the packages (broker, agent, sources, the command):
durable file writes, host:port addresses, awaiting with a timeout (`aio.within`). Nothing
here imports another package."""

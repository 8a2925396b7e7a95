"""The gateway service and its front doors: the FastAPI app, MCP over HTTP and stdio, the
local MCP socket, auth, metrics, the request log, reports. What talks to a running service
from outside it (the client, the stdio bridge and relay) lives in `client/`.

Modules here are imported one by one (this file imports nothing), so `system1 mcp` loads
neither FastAPI nor the core's providers.
"""

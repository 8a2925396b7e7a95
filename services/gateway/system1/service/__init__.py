"""The gateway service and its front doors: the FastAPI app, MCP over HTTP and stdio, the
bridge and the client of a running service, auth, metrics, the request log, reports.

Modules here are imported one by one (this file imports nothing), so the stdio bridge loads
neither FastAPI nor the core's providers.
"""

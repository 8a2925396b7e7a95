"""The decision core: schema v1, config, the provider chain and its lanes, calibration, health.

It imports no web framework and no metrics library; the service and the standalone MCP server
both run it.
"""

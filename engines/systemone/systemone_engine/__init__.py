"""A `/v1/systemone` engine server for decision engines that ship as weights with no server."""

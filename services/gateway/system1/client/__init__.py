"""Everything that talks to a running gateway service from outside it: the typed client, the
stdio bridge and relay, the header names and the bridge token. Below `service` and `offline`."""

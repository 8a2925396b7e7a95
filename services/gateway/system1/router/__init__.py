"""The `model: auto` router: a System-One decision picks which chat model answers a request."""

"""Faithful stand-ins for services the tests cannot reach here (hosted chat APIs)."""

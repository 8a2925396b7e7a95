"""Work that reads files and asks a running service through its client: calibration fitting
and reports, routing evaluation, Claude Code transcripts, spawn outcomes and the usage report.
Nothing here runs on the request path."""

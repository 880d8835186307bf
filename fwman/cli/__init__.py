"""Command-line interface: click only. Options, choosing the Host, rendering, exit codes."""

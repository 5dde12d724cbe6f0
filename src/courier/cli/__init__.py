"""The `courier` command line."""

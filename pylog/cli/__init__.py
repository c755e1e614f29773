"""The ``pylog`` command line: one module per subcommand (docs/cli.md)."""

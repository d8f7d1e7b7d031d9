"""The exception the CLI turns into one line on stderr and exit code 2."""


class InputError(ValueError):
    """Bad user input: a sweep file, a CLI option, a cluster file or a store path."""

"""bench: the command-line client of benchd. Importing the package imports nothing."""

"""Stage 6 of 6, the commands: a person's or CI's arguments in, exit codes and reports out.
`python -m components ...`: validate, render and diff, status, schema, the CI driver, teardown."""

"""Stage 4 of 6, the checks: a stack's config in, a FleetSpec safe to deploy (or every problem).
Fleet-wide rules, object limits, immutable fields, CRD schemas; load.py runs them all."""

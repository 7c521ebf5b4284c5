"""Stage 1 of 6, the model: a stack file (or pulumi.Config) in, read safely and typed.
Gives a FleetSpec with every value of the wrong shape refused; imports no other stage."""

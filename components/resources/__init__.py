"""Stage 5 of 6, the resources: a checked FleetSpec in, Pulumi resources out.
The component resources and dynamic providers the Pulumi program registers."""

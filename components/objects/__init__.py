"""Stage 2 of 6, the objects: a FleetSpec in, the Kubernetes objects each cluster gets out.
Pure builders (no Pulumi, no network); the fleet's labels are stamped once, in fleet.py."""

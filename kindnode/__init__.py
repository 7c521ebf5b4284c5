"""The kind tier: a Docker host prepared for kind, and kind's node image and the fleet's images
built from pinned Go modules and Debian packages, for machines with no image registry."""

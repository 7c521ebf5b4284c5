"""An old module path of the dynamic providers, kept because Pulumi states hold it: dill
pickles a provider by module and class name (pulumi v3.272.0
sdk/python/lib/pulumi/dynamic/dynamic.py serialize_provider), and the engine reads, diffs
and deletes a resource with the pickle its state holds. Stacks deployed before the move
to components/resources/ name these classes here (the kind provider lived here before
components/clusters.py, too)."""

from components.resources.clusters import KindClusterProvider
from components.resources.providers import ControllerImageProvider, ServiceAccountTokenProvider

__all__ = ["ControllerImageProvider", "KindClusterProvider", "ServiceAccountTokenProvider"]

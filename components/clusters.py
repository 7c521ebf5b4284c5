"""An old module path of the kind dynamic provider, kept because Pulumi states hold it
(see components/providers.py): stacks deployed before the move to components/resources/
name the provider here."""

from components.resources.clusters import KindClusterProvider

__all__ = ["KindClusterProvider"]

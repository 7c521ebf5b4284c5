"""Stage 3 of 6, upstream: a pinned release's URL in, its manifest text out.
Fetched once, kept whole and verified by digest in a local cache; builds no objects."""

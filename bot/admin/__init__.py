"""Setting the App up and looking after it: ``register`` (the manifest flow), ``doctor`` (every check in
plain words)."""

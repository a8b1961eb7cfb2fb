"""App specs: a declarative, versioned format (``schema.json``), its loader and the generic app that serves it."""

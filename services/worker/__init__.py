"""The embedder worker as a service of its own (`factbank serve worker`)."""
